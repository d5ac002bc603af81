package providers

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestErrorJSON(t *testing.T) {
	tests := []struct {
		name string
		e    Error
		want map[string]any
	}{
		{"empty param and code are null", Error{Type: "invalid_request_error", Message: `bad "x"`},
			map[string]any{"message": `bad "x"`, "type": "invalid_request_error", "param": nil, "code": nil}},
		{"all set", Error{Type: "invalid_request_error", Code: "invalid_value", Param: "messages[0].role", Message: "m"},
			map[string]any{"message": "m", "type": "invalid_request_error", "param": "messages[0].role", "code": "invalid_value"}},
		{"code only", Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "slow down"},
			map[string]any{"message": "slow down", "type": "rate_limit_error", "param": nil, "code": "rate_limit_exceeded"}},
		{"escapes and invalid UTF-8", Error{Type: "t\\", Param: "p\n", Code: "c\x00", Message: "a\xffb\u2028</script>"},
			map[string]any{"message": "a\uFFFDb\u2028</script>", "type": "t\\", "param": "p\n", "code": "c\x00"}},
		{"everything empty", Error{},
			map[string]any{"message": "", "type": "", "param": nil, "code": nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.e.JSON()
			if !json.Valid(out) {
				t.Fatalf("invalid JSON %s", out)
			}
			var got map[string]map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			if len(got) != 1 || len(got["error"]) != 4 || !reflect.DeepEqual(got["error"], tc.want) {
				t.Errorf("%s, want error %v", out, tc.want)
			}
		})
	}
}

// TestErrorJSONBytes pins the exact bytes: the keys in OpenAI's order and
// nothing else.
func TestErrorJSONBytes(t *testing.T) {
	e := InvalidParam("messages[1].content[0].type", "unknown content part type %q", "video")
	want := `{"error":{"message":"unknown content part type \"video\"","type":"invalid_request_error","param":"messages[1].content[0].type","code":"invalid_value"}}`
	if got := string(e.JSON()); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if e.Error() != `unknown content part type "video"` {
		t.Errorf("Error() = %q", e.Error())
	}
}

func TestInvalidParamAndUnsupported(t *testing.T) {
	if got, want := *InvalidParam("n", "%s must be at least %d", "n", 1),
		(Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "n", Message: "n must be at least 1"}); got != want {
		t.Errorf("InvalidParam = %+v, want %+v", got, want)
	}
	if got, want := *Unsupported("logit_bias", "anthropic"),
		(Error{Status: 400, Type: "invalid_request_error", Code: "unsupported_parameter", Param: "logit_bias",
			Message: "logit_bias is not supported by provider type anthropic"}); got != want {
		t.Errorf("Unsupported = %+v, want %+v", got, want)
	}
	if got, want := *UnsupportedBecause("modalities", "audio output is not supported"),
		(Error{Status: 400, Type: "invalid_request_error", Code: "unsupported_parameter", Param: "modalities",
			Message: "audio output is not supported"}); got != want {
		t.Errorf("UnsupportedBecause = %+v, want %+v", got, want)
	}
}

func TestStatusText(t *testing.T) {
	for status, want := range map[int]string{502: "502 Bad Gateway", 429: "429 Too Many Requests", 599: "status 599", 529: "status 529"} {
		if got := StatusText(status); got != want {
			t.Errorf("StatusText(%d) = %q, want %q", status, got, want)
		}
	}
}

func TestTypeForStatus(t *testing.T) {
	tests := []struct {
		status int
		want   string
	}{
		{400, "invalid_request_error"},
		{401, "authentication_error"},
		{402, "invalid_request_error"},
		{403, "permission_error"},
		{404, "not_found_error"},
		{408, "invalid_request_error"},
		{409, "invalid_request_error"},
		{413, "invalid_request_error"},
		{422, "invalid_request_error"},
		{429, "rate_limit_error"},
		{499, "invalid_request_error"},
		{500, "server_error"},
		{502, "server_error"},
		{503, "server_error"},
		{504, "server_error"},
		{520, "server_error"},
		{529, "server_error"},
		{599, "server_error"},
	}
	for _, tc := range tests {
		if got := TypeForStatus(tc.status); got != tc.want {
			t.Errorf("TypeForStatus(%d) = %q, want %q", tc.status, got, tc.want)
		}
	}
}

// TestErrorFromBodyEdges covers what the openai package's table does not:
// the fallback for statuses without a name and bodies too deep to parse.
// (The shapes of real providers' bodies are tested in providers/openai.)
func TestErrorFromBodyEdges(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   Error
	}{
		{"cloudflare 520", 520, `<html>origin error</html>`,
			Error{Status: 520, Type: "server_error", Message: "the provider answered status 520"}},
		{"unnamed 4xx", 499, ``,
			Error{Status: 499, Type: "invalid_request_error", Message: "the provider answered status 499"}},
		// 16 MB of '[' (the gateway reads up to 64 MB of an upstream body)
		// overflowed the stack in gjson.ValidBytes: a fatal error.
		{"too deep", 500, strings.Repeat("[", 16<<20),
			Error{Status: 500, Type: "server_error", Message: "the provider answered Internal Server Error"}},
		{"deep but allowed", 400, `{"error":{"message":"m","x":` + strings.Repeat("[", MaxDepth-2) + strings.Repeat("]", MaxDepth-2) + `}}`,
			Error{Status: 400, Type: "invalid_request_error", Message: "m"}},
		{"one level too deep", 400, `{"error":{"message":"m","x":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}}`,
			Error{Status: 400, Type: "invalid_request_error", Message: "the provider answered Bad Request"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := *ErrorFromBody(tc.status, []byte(tc.body)); got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestErrorTypeMessage(t *testing.T) {
	for body, want := range map[string][2]string{
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`: {"overloaded_error", "Overloaded"},
		`{"error":{"message":"m"}}`:           {"", "m"},
		`{"error":"bad thing"}`:               {"", "bad thing"},
		`{"message":"too many tokens"}`:       {"", "too many tokens"},
		`{"error":7,"message":"m"}`:           {"", "m"},
		`<html>502 Bad Gateway</html>`:        {"", ""},
		`{"message":{"text":"not a string"}}`: {"", ""},
		``:                                    {"", ""},
	} {
		if typ, msg := ErrorTypeMessage([]byte(body)); [2]string{typ, msg} != want {
			t.Errorf("ErrorTypeMessage(%s) = %q, %q; want %q", body, typ, msg, want)
		}
	}
}
