package messages

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"net/url"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		e      providers.Error
		status int
		typ    string
	}{
		{providers.Error{Status: 400, Type: "invalid_request_error"}, 400, "invalid_request_error"},
		{providers.Error{Status: 422}, 422, "invalid_request_error"},
		{providers.Error{Status: 409}, 409, "invalid_request_error"},
		{providers.Error{Status: 401, Type: "authentication_error"}, 401, "authentication_error"},
		{providers.Error{Status: 402}, 402, "billing_error"},
		{providers.Error{Status: 403, Type: "permission_error"}, 403, "permission_error"},
		{providers.Error{Status: 404, Code: "model_not_found"}, 404, "not_found_error"},
		{providers.Error{Status: 413}, 413, "request_too_large"},
		{providers.Error{Status: 429, Code: "rate_limit_exceeded"}, 429, "rate_limit_error"},
		{providers.Error{Status: 500, Type: "server_error"}, 500, "api_error"},
		{providers.Error{Status: 502, Code: "bad_upstream_event"}, 502, "api_error"},
		{providers.Error{Status: 503}, 503, "overloaded_error"},
		{providers.Error{Status: 529}, 529, "overloaded_error"},
		{providers.Error{Status: 504}, 504, "timeout_error"},
		{providers.Error{Status: 500, Type: "server_error", Code: "overloaded"}, 500, "overloaded_error"},
		{providers.Error{Status: 502, Type: "server_error", Code: "timeout"}, 502, "timeout_error"},
		{providers.Error{Status: 0}, 500, "api_error"},
		{providers.Error{Status: 200}, 500, "api_error"},
	}
	for _, tt := range tests {
		if s, typ := ErrorStatus(&tt.e), ErrorType(&tt.e); s != tt.status || typ != tt.typ {
			t.Errorf("%+v: %d %s, want %d %s", tt.e, s, typ, tt.status, tt.typ)
		}
	}

	e := &providers.Error{Status: 400, Code: "context_length_exceeded", Message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens."}
	body := ErrorBody(e)
	if gjson.GetBytes(body, "error.message").Str != "prompt is too long: "+e.Message || gjson.GetBytes(body, "type").Str != "error" {
		t.Errorf("context length error body %s", body)
	}
	already := &providers.Error{Status: 400, Code: "context_length_exceeded", Message: "prompt is too long: 210118 tokens > 200000 maximum"}
	if got := ErrorMessage(already); got != already.Message {
		t.Errorf("an Anthropic-worded message was reworded: %q", got)
	}
	if got := ErrorMessage(&providers.Error{Status: 503}); got != "Service Unavailable" {
		t.Errorf("an empty message became %q", got)
	}
	odd := &providers.Error{Status: 500, Message: "quote \" and \u2028 newline\n"}
	if !json.Valid(ErrorBody(odd)) {
		t.Errorf("invalid JSON: %s", ErrorBody(odd))
	}
	ev := AppendErrorEvent(nil, &providers.Error{Status: 429, Message: "slow down"})
	if string(ev) != "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}\n\n" {
		t.Errorf("error event %q", ev)
	}
}

func TestStreamErrorStatus(t *testing.T) {
	tests := []struct {
		obj    string
		status int
	}{
		{`{"message":"m","type":"tokens","code":"rate_limit_exceeded"}`, 429},
		{`{"message":"m","type":"invalid_request_error","code":"context_length_exceeded"}`, 400},
		{`{"message":"m","type":"server_error","code":"overloaded"}`, 503},
		{`{"message":"m","type":"server_error","code":"stream_incomplete"}`, 500},
		{`{"message":"m","type":"BadRequestError","code":400}`, 400},
		{`{"message":"m","type":"not_found_error"}`, 404},
		{`"a plain string"`, 500},
	}
	for _, tt := range tests {
		e := streamError(gjson.Parse(tt.obj))
		if e.Status != tt.status || e.Message == "" {
			t.Errorf("%s: %+v, want status %d", tt.obj, e, tt.status)
		}
	}
}

// pngURL is a data: URL of a w × h PNG.
func pngURL(t *testing.T, w, h int) string {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}

func TestEstimateTokens(t *testing.T) {
	if got := textTokens("abcdefgh"); got != 2 {
		t.Errorf("8 ASCII characters: %d tokens, want 2", got)
	}
	if got := textTokens("日本語のテキスト"); got != 8 {
		t.Errorf("8 CJK characters: %d, want 8", got)
	}
	if got := textTokens("Привет"); got != 3 {
		t.Errorf("6 Cyrillic letters: %d, want 3", got)
	}
	if got := textTokens(""); got != 0 {
		t.Errorf("empty: %d", got)
	}
	if got := imageTokens(pngURL(t, 750, 100)); got != 100 {
		t.Errorf("750×100 PNG: %d tokens, want 100", got)
	}
	if got := imageTokens(pngURL(t, 3136, 200)); got != 1568*100/750 {
		t.Errorf("3136×200 PNG (halved to fit 1568): %d tokens, want %d", got, 1568*100/750)
	}
	if got := imageTokens(pngURL(t, 4000, 4000)); got != imageTokensMax {
		t.Errorf("a large PNG: %d, want the cap %d", got, imageTokensMax)
	}
	if got := imageTokens("https://example.com/x.png"); got != imageTokensMax {
		t.Errorf("a URL: %d", got)
	}
	if got := imageTokens("data:image/webp;base64,UklGRg=="); got != imageTokensMax {
		t.Errorf("an unreadable image: %d", got)
	}
	pdf := "data:application/pdf;base64," + base64.StdEncoding.EncodeToString([]byte("%PDF-1.4 /Type /Pages /Type /Page /Type/Page /Type /Page>>"))
	if got := pdfTokens(pdf); got != 3*pdfPageTokens {
		t.Errorf("3-page PDF: %d", got)
	}

	body := `{"model":"m","system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"abcd"},` +
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + strings.TrimPrefix(pngURL(t, 750, 100), "data:image/png;base64,") + `"}}]}],` +
		`"tools":[{"name":"f","input_schema":{"type":"object"}}]}`
	out, err := CountTokens([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	hub, _ := ToChat([]byte(body))
	tools := perTool + textTokens(gjson.GetBytes(hub, "tools.0").Raw)
	// request + system (3+3) + user (3 + 1 text + 100 image) + tools
	want := perRequest + 6 + 3 + 1 + 100 + tools
	if gjson.GetBytes(out, "input_tokens").Int() != int64(want) {
		t.Errorf("CountTokens = %s, want %d", out, want)
	}
	if _, err := CountTokens([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"hologram"}]}]}`)); err == nil {
		t.Error("an untranslatable count_tokens request was counted")
	}
}

func TestModelList(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e"}
	tests := []struct {
		query, want string
	}{
		{"", `{"data":[<a>,<b>,<c>,<d>,<e>],"has_more":false,"first_id":"a","last_id":"e"}`},
		{"limit=2", `{"data":[<a>,<b>],"has_more":true,"first_id":"a","last_id":"b"}`},
		{"limit=2&after_id=b", `{"data":[<c>,<d>],"has_more":true,"first_id":"c","last_id":"d"}`},
		{"limit=2&after_id=d", `{"data":[<e>],"has_more":false,"first_id":"e","last_id":"e"}`},
		{"limit=2&before_id=e", `{"data":[<c>,<d>],"has_more":true,"first_id":"c","last_id":"d"}`},
		{"limit=3&before_id=c", `{"data":[<a>,<b>],"has_more":false,"first_id":"a","last_id":"b"}`},
		{"after_id=zzz", `{"data":[],"has_more":false,"first_id":null,"last_id":null}`},
		{"after_id=e", `{"data":[],"has_more":false,"first_id":null,"last_id":null}`},
	}
	for _, tt := range tests {
		q, _ := url.ParseQuery(tt.query)
		page, err := ParseModelPage(q)
		if err != nil {
			t.Fatalf("%s: %v", tt.query, err)
		}
		got := string(ModelList(ids, page))
		want := tt.want
		for _, id := range ids {
			want = strings.ReplaceAll(want, "<"+id+">", string(ModelInfo(id)))
		}
		if got != want {
			t.Errorf("%s:\n got %s\nwant %s", tt.query, got, want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("invalid JSON %s", got)
		}
	}
	if got := string(ModelInfo("x\"y")); got != `{"type":"model","id":"x\"y","display_name":"x\"y","created_at":"1970-01-01T00:00:00Z"}` {
		t.Errorf("ModelInfo = %s", got)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "after_id=a&before_id=b"} {
		v, _ := url.ParseQuery(q)
		if _, err := ParseModelPage(v); err == nil {
			t.Errorf("%s was accepted", q)
		}
	}
}
