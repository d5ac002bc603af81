package quill_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providerkit"

	"example.com/modelgate-provider-quill/quill"
)

// suite is modelgate's conformance kit run on the Quill translator, with
// an answer of Quill's and the same answer streamed (testdata).
func suite(t testing.TB) providerkit.ChatSuite {
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return providerkit.ChatSuite{
		Chat:   quill.Chat{Now: func() time.Time { return time.Unix(1750000000, 0) }},
		Model:  "quill-1",
		Answer: read("answer.json"),
		Stream: read("stream.ndjson"),
		Usage:  providerkit.Usage{Prompt: 12, Completion: 6, Total: 18},
		Errors: []providerkit.ErrorCase{
			{Name: "overloaded whatever the status", Status: 500,
				Body: `{"error":{"kind":"overloaded","detail":"busy"}}`,
				Want: providers.Error{Status: 503, Type: "server_error", Code: "overloaded", Message: "busy"}},
			{Name: "rate limited", Status: 429,
				Body: `{"error":{"kind":"rate_limited","detail":"slow down"}}`,
				Want: providers.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "slow down"}},
			{Name: "a bad request", Status: 400,
				Body: `{"error":{"kind":"bad_request","detail":"turns must be a non-empty array"}}`,
				Want: providers.Error{Status: 400, Type: "invalid_request_error", Message: "turns must be a non-empty array"}},
			{Name: "the gateway's key refused", Status: 403,
				Body: `{"error":{"kind":"denied","detail":"the signature does not match"}}`,
				Want: providers.Error{Status: 502, Type: "server_error", Code: "upstream_auth_failed"}},
		},
		Refuses: []string{"tools", "tool results", "image", "json output"},
	}
}

func TestConformance(t *testing.T) { providerkit.RunChat(t, suite(t)) }

func FuzzChatRequest(f *testing.F) { suite(f).FuzzRequest(f) }

func FuzzChatResponse(f *testing.F) { suite(f).FuzzResponse(f) }

func FuzzChatStream(f *testing.F) { suite(f).FuzzStream(f) }

// TestChatRequest checks the body Quill gets for a request with every
// field it takes.
func TestChatRequest(t *testing.T) {
	body := `{"model":"alias","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":"ok"},{"role":"user","content":"go"}],` +
		`"max_completion_tokens":20,"temperature":0.5,"stop":"END","top_p":0.9,"stream":true}`
	req := providerkit.CheckRequest(t, quill.Chat{}, body, "quill-1", false)
	want := `{"model":"quill-1","turns":[{"speaker":"guide","say":"Be brief."},{"speaker":"human","say":"a\nb"},{"speaker":"quill","say":"ok"},{"speaker":"human","say":"go"}],"limit":20,"heat":0.5,"stop":["END"],"stream":true}`
	if string(req.Body) != want || req.Path != "/v1/generate" || req.Framing != quill.NDJSON {
		t.Errorf("got %s %s %v\nwant %s", req.Path, req.Body, req.Framing, want)
	}
}

// TestRefused: what Quill cannot express is refused, naming the
// parameter.
func TestRefused(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"Hi"}]`
	for _, tc := range []struct{ body, param string }{
		{`{"model":"m",` + msgs + `,"n":2}`, "n"},
		{`{"model":"m",` + msgs + `,"logprobs":true}`, "logprobs"},
		{`{"model":"m",` + msgs + `,"response_format":{"type":"json_object"}}`, "response_format"},
		{`{"model":"m","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[1].tool_calls"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"image_url","image_url":{"url":"https://x.example/a.png"}}]}]}`, "messages[0].content[1].type"},
	} {
		providerkit.ChatRequestError(t, quill.Chat{}, tc.body, "quill-1", tc.param, "unsupported_parameter")
	}
}

func TestNDJSON(t *testing.T) {
	in := []byte("{\"a\":1}\r\n\n\n{\"b\":2}\n{\"c\"")
	var events []string
	for {
		ev, rest, ok, err := quill.NDJSON.Cut(in)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if string(rest) != `{"c"` {
				t.Errorf("left %q", rest)
			}
			break
		}
		events = append(events, string(ev))
		in = rest
	}
	if strings.Join(events, "|") != `{"a":1}|{"b":2}` {
		t.Errorf("events %q", events)
	}
	if _, _, _, err := quill.NDJSON.Cut(bytes.Repeat([]byte("x"), quill.MaxLine+1)); err == nil {
		t.Error("a line past MaxLine was not refused")
	}
	for ct, want := range map[string]bool{"application/x-ndjson": true, "Application/X-NDJSON; charset=utf-8": true, "text/event-stream": false, "application/json": false} {
		if quill.NDJSON.IsStream(ct) != want {
			t.Errorf("IsStream(%q) = %v", ct, !want)
		}
	}
}

// TestSigner signs a request as it goes out and verifies it as Quill
// does: another body, URI, key or an old signature fails.
func TestSigner(t *testing.T) {
	now := time.Unix(1750000000, 0)
	s := quill.Signer{KeyID: "kid", Secret: []byte("s3cret"), Now: func() time.Time { return now }}
	body := []byte(`{"model":"quill-1"}`)
	req := httptest.NewRequest(http.MethodPost, "http://api.quill.example/v1/generate?x=1", bytes.NewReader(body))
	if err := s.Authenticate(req, body); err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("X-Quill-Key") != "kid" || gjson.Valid(req.Header.Get("X-Quill-Signature")) {
		t.Errorf("headers %v", req.Header)
	}
	if !s.Verify(req.Header, "POST", "/v1/generate?x=1", body, time.Minute) {
		t.Fatal("the signature does not verify")
	}
	later := s
	later.Now = func() time.Time { return now.Add(2 * time.Minute) }
	other := s
	other.Secret = []byte("other")
	for name, ok := range map[string]bool{
		"another body":   s.Verify(req.Header, "POST", "/v1/generate?x=1", []byte(`{}`), time.Minute),
		"another URI":    s.Verify(req.Header, "POST", "/v1/generate", body, time.Minute),
		"another secret": other.Verify(req.Header, "POST", "/v1/generate?x=1", body, time.Minute),
		"too old":        later.Verify(req.Header, "POST", "/v1/generate?x=1", body, time.Minute),
	} {
		if ok {
			t.Errorf("%s verified", name)
		}
	}
}
