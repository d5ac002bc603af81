package providertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/tidwall/gjson"
)

// bedrockAnyKey is a well-formed SigV4 header for a fake with no Bedrock
// key configured, which checks the form and not the signature.
var bedrockAnyKey = []string{
	"Authorization", "AWS4-HMAC-SHA256 Credential=AKIDANY/20260101/us-east-1/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=" + strings.Repeat("0", 64),
	"X-Amz-Date", "20260101T000000Z",
}

// Test credentials of the Bedrock fake.
const (
	bedrockKeyID  = "AKIDFAKEBEDROCK0001"
	bedrockSecret = "fake/Secret+Key/for/the/bedrock/fake/0001"
)

// newBedrock starts a fake that checks Bedrock signatures.
func newBedrock(t *testing.T) *Server {
	t.Helper()
	return Start(t, Options{Keys: map[string]string{"bedrock": bedrockKeyID + ":" + bedrockSecret}})
}

// bedrockPath is the Converse (or ConverseStream) path of a model, escaped
// as the AWS SDK escapes it.
func bedrockPath(model string, stream bool) string {
	p := "/model/" + strings.ReplaceAll(url.PathEscape(model), ":", "%3A")
	if stream {
		return p + "/converse-stream"
	}
	return p + "/converse"
}

// signed is a request signed as aws-sdk-go-v2 signs one, with creds.
func signed(t *testing.T, s *Server, path, body string, creds aws.Credentials, at time.Time) *http.Request {
	t.Helper()
	req := NewRequest(t, http.MethodPost, s.URL+path, body)
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "bedrock", "us-east-1", at); err != nil {
		t.Fatal(err)
	}
	return req
}

// do sends a request and reads the answer.
func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	res, b := Do(t, req)
	return res, string(b)
}

var bedrockCreds = aws.Credentials{AccessKeyID: bedrockKeyID, SecretAccessKey: bedrockSecret}

// converse sends a signed Converse request and returns the answer, which
// must be a 200.
func converse(t *testing.T, s *Server, model, body string) gjson.Result {
	t.Helper()
	res, got := do(t, signed(t, s, bedrockPath(model, false), body, bedrockCreds, time.Now()))
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" || !gjson.Valid(got) || res.Header.Get("X-Amzn-Requestid") == "" {
		t.Fatalf("%d %v %s", res.StatusCode, res.Header, got)
	}
	return gjson.Parse(got)
}

func TestBedrockAnswer(t *testing.T) {
	s := newBedrock(t)
	const model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
	got := converse(t, s, model, `{"system":[{"text":"be brief"}],"messages":[{"role":"user","content":[{"text":"hello there"}]}],"inferenceConfig":{"maxTokens":100}}`)
	if got.Get("output.message.content.0.text").Str != "echo: hello there" || got.Get("stopReason").Str != "end_turn" ||
		got.Get("usage.inputTokens").Int() != 4 || got.Get("usage.outputTokens").Int() != 3 || got.Get("usage.totalTokens").Int() != 7 {
		t.Errorf("answer %s", got.Raw)
	}
	if r := s.Requests(); r[len(r)-1].Model != model || r[len(r)-1].Format != "bedrock" {
		t.Errorf("recorded %+v", r[len(r)-1])
	}

	// An ARN holds '/' and ':' in one escaped path segment.
	arn := "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
	converse(t, s, arn, `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`)
	if r := s.Requests(); r[len(r)-1].Model != arn {
		t.Errorf("recorded model %q", r[len(r)-1].Model)
	}

	// max tokens cut the answer.
	got = converse(t, s, model, `{"messages":[{"role":"user","content":[{"text":"one two three four"}]}],"inferenceConfig":{"maxTokens":2}}`)
	if got.Get("output.message.content.0.text").Str != "echo: one" || got.Get("stopReason").Str != "max_tokens" {
		t.Errorf("truncated %s", got.Raw)
	}
}

const bedrockTools = `"toolConfig":{"tools":[{"toolSpec":{"name":"search","inputSchema":{"json":{"type":"object","properties":{"query":{"type":"string"}}}}}}]}`

func TestBedrockToolLoop(t *testing.T) {
	s := newBedrock(t)
	got := converse(t, s, "m", `{"messages":[{"role":"user","content":[{"text":"weather in Paris"}]}],`+bedrockTools+`}`)
	use := got.Get("output.message.content.0.toolUse")
	if use.Get("name").Str != "search" || use.Get("input.query").Str != "weather in Paris" || got.Get("stopReason").Str != "tool_use" ||
		!strings.HasPrefix(use.Get("toolUseId").Str, "tooluse_") {
		t.Fatalf("tool call %s", got.Raw)
	}
	next := `{"messages":[{"role":"user","content":[{"text":"weather in Paris"}]},` +
		`{"role":"assistant","content":[` + got.Get("output.message.content.0").Raw + `]},` +
		`{"role":"user","content":[{"toolResult":{"toolUseId":` + use.Get("toolUseId").Raw + `,"content":[{"text":"sunny"},{"json":{"temp":21}}]}}]}],` + bedrockTools + `}`
	got = converse(t, s, "m", next)
	if txt := got.Get("output.message.content.0.text").Str; txt != `tool said: sunny {"temp":21}` || got.Get("stopReason").Str != "end_turn" {
		t.Errorf("after the tool: %s", got.Raw)
	}
}

func TestBedrockStructured(t *testing.T) {
	s := newBedrock(t)
	schema := `{"type":"object","additionalProperties":false,"required":["summary","words"],"properties":{"summary":{"type":"string"},"words":{"type":"integer"}}}`
	q, _ := json.Marshal(schema)
	got := converse(t, s, "m", `{"messages":[{"role":"user","content":[{"text":"describe Paris"}]}],`+
		`"outputConfig":{"textFormat":{"type":"json_schema","structure":{"jsonSchema":{"schema":`+string(q)+`,"name":"city"}}}}}`)
	if txt := got.Get("output.message.content.0.text").Str; txt != `{"summary":"echo: describe Paris","words":3}` {
		t.Errorf("native structured output: %s", got.Raw)
	}
	// A forced tool answers with an instance of its schema.
	got = converse(t, s, "m", `{"messages":[{"role":"user","content":[{"text":"describe Paris"}]}],`+
		`"toolConfig":{"tools":[{"toolSpec":{"name":"json_tool_call","inputSchema":{"json":`+schema+`}}}],"toolChoice":{"tool":{"name":"json_tool_call"}}}}`)
	if in := got.Get("output.message.content.0.toolUse.input").Raw; in != `{"summary":"echo: describe Paris","words":3}` {
		t.Errorf("forced tool: %s", got.Raw)
	}
}

// TestBedrockThinking: reasoning comes back signed; the signed block must
// come back unchanged and first in a tool loop with thinking on.
func TestBedrockThinking(t *testing.T) {
	s := newBedrock(t)
	thinking := `"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":1024}},"inferenceConfig":{"maxTokens":2000}`
	got := converse(t, s, "m", `{"messages":[{"role":"user","content":[{"text":"weather in Paris"}]}],`+bedrockTools+`,`+thinking+`}`)
	content := got.Get("output.message.content")
	rt := content.Get("0.reasoningContent.reasoningText")
	if rt.Get("text").Str != "thinking about: weather in Paris" || rt.Get("signature").Str == "" || !content.Get("1.toolUse").Exists() {
		t.Fatalf("answer %s", got.Raw)
	}
	if got.Get("usage.outputTokens").Int() != 1+5 {
		t.Errorf("reasoning words count as output: %s", got.Get("usage").Raw)
	}
	id := content.Get("1.toolUse.toolUseId").Raw
	loop := func(assistant string) string {
		return `{"messages":[{"role":"user","content":[{"text":"weather in Paris"}]},{"role":"assistant","content":` + assistant + `},` +
			`{"role":"user","content":[{"toolResult":{"toolUseId":` + id + `,"content":[{"text":"sunny"}]}}]}],` + bedrockTools + `,` + thinking + `}`
	}
	got = converse(t, s, "m", loop(content.Raw))
	if got.Get("output.message.content.0.reasoningContent.reasoningText.text").Str != "thinking about the tool results: sunny" ||
		got.Get("output.message.content.1.text").Str != "tool said: sunny" {
		t.Errorf("after the tool: %s", got.Raw)
	}

	for name, assistant := range map[string]string{
		"reasoning left out":  `[` + content.Get("1").Raw + `]`,
		"reasoning after use": `[` + content.Get("1").Raw + `,` + content.Get("0").Raw + `]`,
		"text changed":        strings.Replace(content.Raw, "thinking about", "thinking of", 1),
		"signature changed":   strings.Replace(content.Raw, `"signature":"`, `"signature":"x`, 1),
	} {
		res, body := do(t, signed(t, s, bedrockPath("m", false), loop(assistant), bedrockCreds, time.Now()))
		if res.StatusCode != 400 || !strings.HasPrefix(res.Header.Get("X-Amzn-Errortype"), "ValidationException:") || gjson.Get(body, "message").Str == "" {
			t.Errorf("%s: %d %s", name, res.StatusCode, body)
		}
	}
}

// readBedrockStream decodes a ConverseStream answer with the SDK's decoder.
func readBedrockStream(t *testing.T, body string) []eventstream.Message {
	t.Helper()
	r := strings.NewReader(body)
	dec := eventstream.NewDecoder()
	var msgs []eventstream.Message
	for r.Len() > 0 {
		m, err := dec.Decode(r, nil)
		if err != nil {
			t.Fatalf("message %d: %v", len(msgs), err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func header(m eventstream.Message, name string) string {
	if v := m.Headers.Get(name); v != nil {
		return v.String()
	}
	return ""
}

func TestBedrockStream(t *testing.T) {
	s := newBedrock(t)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"text", `{"messages":[{"role":"user","content":[{"text":"stream this please"}]}]}`, "echo: stream this please"},
		{"tool", `{"messages":[{"role":"user","content":[{"text":"weather in Paris"}]}],` + bedrockTools + `}`, `{"query":"weather in Paris"}`},
		{"thinking", `{"messages":[{"role":"user","content":[{"text":"why"}]}],"additionalModelRequestFields":{"thinking":{"type":"adaptive"}},"outputConfig":{"effort":"low"}}`, "echo: why"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := do(t, signed(t, s, bedrockPath("m", true), tc.body, bedrockCreds, time.Now()))
			if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/vnd.amazon.eventstream" {
				t.Fatalf("%d %v", res.StatusCode, res.Header)
			}
			var types []string
			var text, input, reasoning, signature string
			for _, m := range readBedrockStream(t, body) {
				if header(m, ":message-type") != "event" || header(m, ":content-type") != "application/json" || !json.Valid(m.Payload) {
					t.Fatalf("message %v %s", m.Headers, m.Payload)
				}
				typ := header(m, ":event-type")
				types = append(types, typ)
				d := gjson.GetBytes(m.Payload, "delta")
				text += d.Get("text").Str
				input += d.Get("toolUse.input").Str
				reasoning += d.Get("reasoningContent.text").Str
				signature += d.Get("reasoningContent.signature").Str
				if typ == "metadata" && gjson.GetBytes(m.Payload, "usage.totalTokens").Int() == 0 {
					t.Errorf("metadata %s", m.Payload)
				}
			}
			if types[0] != "messageStart" || types[len(types)-1] != "metadata" || types[len(types)-2] != "messageStop" {
				t.Errorf("events %v", types)
			}
			if got := text + input; got != tc.want {
				t.Errorf("content %q, want %q", got, tc.want)
			}
			if tc.name == "thinking" && (reasoning != "thinking about: why" || signature != bedrockSignature(reasoning)) {
				t.Errorf("reasoning %q signed %q", reasoning, signature)
			}
		})
	}

	for _, model := range []string{"midstream-error", "cutoff"} {
		res, body := do(t, signed(t, s, bedrockPath(model, true), `{"messages":[{"role":"user","content":[{"text":"one two three"}]}]}`, bedrockCreds, time.Now()))
		msgs := readBedrockStream(t, body)
		if res.StatusCode != 200 || len(msgs) != map[string]int{"midstream-error": 3, "cutoff": 2}[model] {
			t.Fatalf("%s: %d, %d messages", model, res.StatusCode, len(msgs))
		}
		last := msgs[len(msgs)-1]
		if model == "midstream-error" && (header(last, ":message-type") != "exception" || header(last, ":exception-type") != "modelStreamErrorException") {
			t.Errorf("midstream-error ends with %v %s", last.Headers, last.Payload)
		}
	}
}

// TestBedrockSignature: the fake recomputes SigV4 and refuses what does
// not match, in AWS's shape.
func TestBedrockSignature(t *testing.T) {
	s := newBedrock(t)
	const body = `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`
	path := bedrockPath("anthropic.claude-3-haiku-20240307-v1:0", false)
	good := func() *http.Request { return signed(t, s, path, body, bedrockCreds, time.Now()) }

	// A header added after signing (as a transport adds them) is fine.
	req := good()
	req.Header.Set("X-Unsigned", "1")
	if res, got := do(t, req); res.StatusCode != 200 {
		t.Fatalf("good: %d %s", res.StatusCode, got)
	}

	tests := []struct {
		name    string
		req     func() *http.Request
		status  int
		errType string
	}{
		{"no signature", func() *http.Request { return NewRequest(t, http.MethodPost, s.URL+path, body) }, 403, "MissingAuthenticationTokenException"},
		{"another access key", func() *http.Request {
			return signed(t, s, path, body, aws.Credentials{AccessKeyID: "AKIDOTHER", SecretAccessKey: bedrockSecret}, time.Now())
		}, 403, "UnrecognizedClientException"},
		{"wrong secret", func() *http.Request {
			return signed(t, s, path, body, aws.Credentials{AccessKeyID: bedrockKeyID, SecretAccessKey: "wrong"}, time.Now())
		}, 403, "InvalidSignatureException"},
		{"body changed", func() *http.Request {
			r := good()
			b := strings.Replace(body, "hi", "ho", 1)
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(b)), int64(len(b))
			return r
		}, 403, "InvalidSignatureException"},
		{"path changed", func() *http.Request {
			r := good()
			r.URL.Path, r.URL.RawPath = "/model/other/converse", ""
			return r
		}, 403, "InvalidSignatureException"},
		{"signed header changed", func() *http.Request {
			r := good()
			r.Header.Set("Content-Type", "application/json; charset=utf-8")
			return r
		}, 403, "InvalidSignatureException"},
		{"host changed", func() *http.Request {
			r := good()
			r.Host = "bedrock-runtime.us-east-1.amazonaws.com"
			return r
		}, 403, "InvalidSignatureException"},
		{"expired", func() *http.Request { return signed(t, s, path, body, bedrockCreds, time.Now().Add(-time.Hour)) }, 403, "InvalidSignatureException"},
		{"session token missing", func() *http.Request {
			return signed(t, s, path, body, aws.Credentials{AccessKeyID: bedrockKeyID, SecretAccessKey: bedrockSecret, SessionToken: "tok"}, time.Now())
		}, 403, "UnrecognizedClientException"},
	}
	for _, tt := range tests {
		res, got := do(t, tt.req())
		if res.StatusCode != tt.status || !strings.HasPrefix(res.Header.Get("X-Amzn-Errortype"), tt.errType+":") || gjson.Get(got, "message").Str == "" {
			t.Errorf("%s: %d %s %s", tt.name, res.StatusCode, res.Header.Get("X-Amzn-Errortype"), got)
		}
	}

	// With a session token configured, it must come signed.
	st := Start(t, Options{Keys: map[string]string{"bedrock": bedrockKeyID + ":" + bedrockSecret + ":session-tok"}})
	creds := aws.Credentials{AccessKeyID: bedrockKeyID, SecretAccessKey: bedrockSecret, SessionToken: "session-tok"}
	if res, got := do(t, signed(t, st, path, body, creds, time.Now())); res.StatusCode != 200 {
		t.Errorf("session token: %d %s", res.StatusCode, got)
	}
	if res, _ := do(t, signed(t, st, path, body, bedrockCreds, time.Now())); res.StatusCode != 403 {
		t.Errorf("no session token: %d", res.StatusCode)
	}
}

func TestBedrockStrictness(t *testing.T) {
	s := newBedrock(t)
	user := `{"role":"user","content":[{"text":"hi"}]}`
	msgs := func(m ...string) string { return `{"messages":[` + strings.Join(m, ",") + `]` }
	use := `{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"search","input":{}}}]}`
	result := func(id string) string {
		return `{"role":"user","content":[{"toolResult":{"toolUseId":"` + id + `","content":[{"text":"ok"}]}}]}`
	}
	for name, body := range map[string]string{
		"not JSON":                 `{"messages":`,
		"model in the body":        `{"model":"m","messages":[` + user + `]}`,
		"OpenAI field":             msgs(user) + `,"max_tokens":5}`,
		"no messages":              `{}`,
		"empty messages":           `{"messages":[]}`,
		"assistant first":          msgs(`{"role":"assistant","content":[{"text":"x"}]}`) + `}`,
		"no alternation":           msgs(user, user) + `}`,
		"system role":              msgs(`{"role":"system","content":[{"text":"x"}]}`) + `}`,
		"string content":           msgs(`{"role":"user","content":"hi"}`) + `}`,
		"empty content":            msgs(`{"role":"user","content":[]}`) + `}`,
		"blank text":               msgs(`{"role":"user","content":[{"text":" "}]}`) + `}`,
		"two members":              msgs(`{"role":"user","content":[{"text":"a","image":{}}]}`) + `}`,
		"OpenAI part":              msgs(`{"role":"user","content":[{"type":"text","text":"a"}]}`) + `}`,
		"image format":             msgs(`{"role":"user","content":[{"image":{"format":"svg","source":{"bytes":"AAAA"}}}]}`) + `}`,
		"image not base64":         msgs(`{"role":"user","content":[{"image":{"format":"png","source":{"bytes":"***"}}}]}`) + `}`,
		"image URL":                msgs(`{"role":"user","content":[{"image":{"format":"png","source":{"url":"https://x"}}}]}`) + `}`,
		"document name":            msgs(`{"role":"user","content":[{"document":{"format":"pdf","name":"a.pdf","source":{"bytes":"AAAA"}}}]}`) + `}`,
		"toolUse from user":        msgs(`{"role":"user","content":[{"toolUse":{"toolUseId":"t1","name":"search","input":{}}}]}`) + `,` + bedrockTools + `}`,
		"tool id":                  msgs(user, `{"role":"assistant","content":[{"toolUse":{"toolUseId":"call:1","name":"search","input":{}}}]}`) + `,` + bedrockTools + `}`,
		"input a string":           msgs(user, `{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"search","input":"{}"}}]}`) + `,` + bedrockTools + `}`,
		"result unanswered":        msgs(user, use, user) + `,` + bedrockTools + `}`,
		"result for another":       msgs(user, use, result("t2")) + `,` + bedrockTools + `}`,
		"no toolConfig":            msgs(user, use, result("t1")) + `}`,
		"tool schema":              msgs(user) + `,"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"properties":{}}}}}]}}`,
		"tool name":                msgs(user) + `,"toolConfig":{"tools":[{"toolSpec":{"name":"a.b","inputSchema":{"json":{"type":"object"}}}}]}}`,
		"OpenAI tool":              msgs(user) + `,"toolConfig":{"tools":[{"type":"function","function":{"name":"f"}}]}}`,
		"choice none":              msgs(user) + `,"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object"}}}}],"toolChoice":{"none":{}}}}`,
		"choice unknown tool":      msgs(user) + `,` + strings.TrimSuffix(bedrockTools, "}") + `,"toolChoice":{"tool":{"name":"g"}}}}`,
		"empty tools":              msgs(user) + `,"toolConfig":{"tools":[]}}`,
		"temperature":              msgs(user) + `,"inferenceConfig":{"temperature":1.5}}`,
		"max tokens":               msgs(user) + `,"inferenceConfig":{"maxTokens":0}}`,
		"OpenAI inference":         msgs(user) + `,"inferenceConfig":{"max_tokens":5}}`,
		"empty stop":               msgs(user) + `,"inferenceConfig":{"stopSequences":[""]}}`,
		"blank system":             msgs(user) + `,"system":[{"text":""}]}`,
		"string system":            msgs(user) + `,"system":"be brief"}`,
		"budget":                   msgs(user) + `,"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":100}},"inferenceConfig":{"maxTokens":2000}}`,
		"budget above max":         msgs(user) + `,"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":2048}},"inferenceConfig":{"maxTokens":2000}}`,
		"thinking and temperature": msgs(user) + `,"additionalModelRequestFields":{"thinking":{"type":"adaptive"}},"inferenceConfig":{"temperature":0.5}}`,
		"thinking forced tool":     msgs(user) + `,"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":1024}},"inferenceConfig":{"maxTokens":2000},` + strings.TrimSuffix(bedrockTools, "}") + `,"toolChoice":{"any":{}}}}`,
		"nova effort":              msgs(user) + `,"additionalModelRequestFields":{"reasoningConfig":{"type":"enabled","maxReasoningEffort":"extreme"}}}`,
		"schema not a string":      msgs(user) + `,"outputConfig":{"textFormat":{"type":"json_schema","structure":{"jsonSchema":{"schema":{"type":"object"}}}}}}`,
		"effort":                   msgs(user) + `,"outputConfig":{"effort":"huge"}}`,
		"service tier":             msgs(user) + `,"serviceTier":{"type":"scale"}}`,
		"metadata":                 msgs(user) + `,"requestMetadata":{"a":"b?"}}`,
		"redacted not base64":      msgs(user, `{"role":"assistant","content":[{"reasoningContent":{"redactedContent":"***"}}]}`) + `}`,
	} {
		res, got := do(t, signed(t, s, bedrockPath("m", false), body, bedrockCreds, time.Now()))
		if res.StatusCode != 400 || res.Header.Get("X-Amzn-Errortype") == "" || gjson.Get(got, "message").Str == "" {
			t.Errorf("%s: %d %s", name, res.StatusCode, got)
		}
	}

	// What Bedrock takes and the gateway sends.
	for name, body := range map[string]string{
		"everything": `{"messages":[{"role":"user","content":[{"text":"hi"},{"image":{"format":"png","source":{"bytes":"AAAA"}}},` +
			`{"image":{"format":"webp","source":{"s3Location":{"uri":"s3://b/k.webp"}}}},{"audio":{"format":"wav","source":{"bytes":"AAAA"}}},` +
			`{"document":{"format":"pdf","name":"Q3 report (final)","source":{"bytes":"AAAA"}}}]}],` +
			`"system":[{"text":"be brief"},{"cachePoint":{"type":"default"}}],"inferenceConfig":{"maxTokens":10,"temperature":0.5,"topP":0.9,"stopSequences":["END"]},` +
			`"serviceTier":{"type":"flex"},"requestMetadata":{"team":"search","run id":"2026-11-07T10:00"},"performanceConfig":{"latency":"standard"}}`,
		"tool loop with redacted reasoning": msgs(user, `{"role":"assistant","content":[{"reasoningContent":{"redactedContent":"AAAA"}},{"text":"x"},{"toolUse":{"toolUseId":"t1","name":"search","input":{"q":1}}}]}`,
			`{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"json":{"a":1}},{"text":"b"}],"status":"error"}},{"text":"go on"}]}`) + `,` + bedrockTools + `}`,
	} {
		res, got := do(t, signed(t, s, bedrockPath("m", false), body, bedrockCreds, time.Now()))
		if res.StatusCode != 200 {
			t.Errorf("%s: %d %s", name, res.StatusCode, got)
		}
	}
	// The signature covers the body: a body Bedrock refuses is still
	// checked for its signature first.
	res, _ := do(t, signed(t, s, bedrockPath("m", false), `{}`, aws.Credentials{AccessKeyID: bedrockKeyID, SecretAccessKey: "wrong"}, time.Now()))
	if res.StatusCode != 403 {
		t.Errorf("bad signature and body: %d", res.StatusCode)
	}
}

const benchBedrock = `{"system":[{"text":"You are a helpful assistant."}],"messages":[{"role":"user","content":[{"text":"What is the capital of France?"}]}],"inferenceConfig":{"maxTokens":64,"temperature":0.2}}`

// The Bedrock benchmarks check the signature's form only (no key
// configured), as the load benchmark's upstream would.
func BenchmarkBedrock(b *testing.B) {
	benchServe(b, bedrockPath("anthropic.claude-3-haiku-20240307-v1:0", false), benchBedrock,
		append([]string{"Content-Type", "application/json"}, bedrockAnyKey...)...)
}

func BenchmarkBedrockStream(b *testing.B) {
	benchServe(b, bedrockPath("anthropic.claude-3-haiku-20240307-v1:0", true), benchBedrock,
		append([]string{"Content-Type", "application/json"}, bedrockAnyKey...)...)
}
