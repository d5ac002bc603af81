package openai

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/modelgate/modelgate/providers"
)

const testdata = "../../testdata/providers/openai/"

// checkOnlyModel checks that out is in with the value of the top-level key
// model replaced by model, and every other byte left as it was.
func checkOnlyModel(t *testing.T, in, out []byte, model string) {
	t.Helper()
	old := gjson.GetBytes(in, "model")
	repl := gjson.GetBytes(out, "model")
	if old.Index == 0 || repl.Index != old.Index {
		t.Fatalf("model at %d in the input, at %d in the output", old.Index, repl.Index)
	}
	if !bytes.Equal(out[:old.Index], in[:old.Index]) {
		t.Fatalf("bytes before the model changed:\n%s\n%s", in[:old.Index], out[:old.Index])
	}
	if !bytes.Equal(out[repl.Index+len(repl.Raw):], in[old.Index+len(old.Raw):]) {
		t.Fatalf("bytes after the model changed:\n%s\n%s", in[old.Index+len(old.Raw):], out[repl.Index+len(repl.Raw):])
	}
	var got string
	if err := json.Unmarshal([]byte(repl.Raw), &got); err != nil {
		t.Fatalf("model %s: %v", repl.Raw, err)
	}
	if want := string([]rune(model)); got != want {
		t.Fatalf("model %q, want %q", got, want)
	}
}

// TestChatRequestGolden translates testdata/providers/openai/<case>.unified.json
// for the model of <case>.openai.json and expects exactly that file: only the
// model's value changes; every other byte (key order, spacing, escapes,
// unknown fields, other keys named model deeper down) stays.
func TestChatRequestGolden(t *testing.T) {
	files, _ := filepath.Glob(testdata + "*.unified.json")
	if len(files) < 2 {
		t.Fatalf("golden files: %v", files)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".unified.json")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(f, ".unified.json") + ".openai.json")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := providers.ValidateChat(in); err != nil {
				t.Fatalf("the input does not pass ValidateChat: %v", err)
			}
			orig := bytes.Clone(in)
			model := gjson.GetBytes(want, "model").Str
			req, err := Chat{}.ChatRequest(in, model)
			if err != nil {
				t.Fatal(err)
			}
			if req.Path != "/chat/completions" || req.Header != nil {
				t.Errorf("path %q header %v", req.Path, req.Header)
			}
			if !bytes.Equal(req.Body, want) {
				t.Errorf("body\n%s\nwant\n%s", req.Body, want)
			}
			if !bytes.Equal(in, orig) {
				t.Error("ChatRequest changed its input")
			}
			checkOnlyModel(t, in, req.Body, model)
			if bytes.Equal(in, want) && &req.Body[0] != &in[0] {
				t.Error("an unchanged model must not copy the body")
			}
		})
	}
}

// TestChatRequestCRLF keeps CRLF line ends, which the golden files avoid
// (a checkout may convert them).
func TestChatRequestCRLF(t *testing.T) {
	in := []byte("{\r\n\t\"model\" : \"a\" ,\r\n\t\"messages\" : [ {\"role\":\"user\",\"content\":\"hi\"} ]\r\n}\r\n")
	req, err := Chat{}.ChatRequest(in, "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	want := "{\r\n\t\"model\" : \"gpt-4o\" ,\r\n\t\"messages\" : [ {\"role\":\"user\",\"content\":\"hi\"} ]\r\n}\r\n"
	if string(req.Body) != want {
		t.Errorf("body %q\nwant %q", req.Body, want)
	}
}

// TestChatRequestModelEncoding checks model names that need escaping.
func TestChatRequestModelEncoding(t *testing.T) {
	in := []byte(`{"model":"x","messages":[{"role":"user","content":"hi"}]}`)
	for _, model := range []string{`a"b`, `back\slash`, "tab\there", "ünï/✓", "<&>", "bad\xffutf8", "\u2028", ""} {
		req, err := Chat{}.ChatRequest(in, model)
		if err != nil {
			t.Fatalf("%q: %v", model, err)
		}
		if !json.Valid(req.Body) {
			t.Fatalf("%q: invalid JSON %s", model, req.Body)
		}
		checkOnlyModel(t, in, req.Body, model)
	}
}

func TestChatRequestUnchangedModel(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	req, err := Chat{}.ChatRequest(body, "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	if &req.Body[0] != &body[0] || len(req.Body) != len(body) {
		t.Error("an unchanged model must not copy the body")
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Chat{}.ChatRequest(body, "gpt-4o") }); n != 0 {
		t.Errorf("%v allocations for an unchanged model, want 0", n)
	}
}

func TestChatPassThrough(t *testing.T) {
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`)
	out, used, err := Chat{}.ChatResponse(body)
	if err != nil || &out[0] != &body[0] || len(out) != len(body) {
		t.Errorf("ChatResponse changed the body: %s, %v", out, err)
	}
	if used.Known {
		t.Errorf("an answer without usage: %+v, want none known", used)
	}
	withUsage := []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[],"usage":{"prompt_tokens":14,"completion_tokens":10,"total_tokens":24,"prompt_tokens_details":{"cached_tokens":4}}}`)
	if _, used, _ := (Chat{}).ChatResponse(withUsage); used != (providers.Used{Prompt: 14, Completion: 10, Cached: 4, Known: true}) {
		t.Errorf("the usage of an answer: %+v", used)
	}
	for _, opts := range []providers.StreamOptions{{}, {IncludeUsage: true}} {
		if tr := (Chat{}).ChatStream(opts); tr != nil {
			t.Errorf("ChatStream(%+v) = %v, want nil (events pass through)", opts, tr)
		}
	}
	var _ providers.Chat = Chat{}
}

func TestError(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   providers.Error
	}{
		{"openai", 400, `{"error":{"message":"bad model","type":"invalid_request_error","param":"model","code":"model_not_found"}}`,
			providers.Error{Status: 400, Type: "invalid_request_error", Param: "model", Code: "model_not_found", Message: "bad model"}},
		{"openai 401", 401, `{"error":{"message":"Incorrect API key provided: sk-abc. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			providers.Error{Status: 401, Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided: sk-abc. You can find your API key at https://platform.openai.com/account/api-keys."}},
		{"openai quota", 429, `{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			providers.Error{Status: 429, Type: "insufficient_quota", Code: "insufficient_quota", Message: "You exceeded your current quota."}},
		{"pretty printed", 404, "{\n  \"error\": {\n    \"message\": \"The model `x` does not exist\",\n    \"type\": \"invalid_request_error\",\n    \"param\": null,\n    \"code\": \"model_not_found\"\n  }\n}\n",
			providers.Error{Status: 404, Type: "invalid_request_error", Code: "model_not_found", Message: "The model `x` does not exist"}},
		{"vllm integer code equal to the status", 400, `{"error":{"message":"too long","type":"BadRequestError","param":null,"code":400}}`,
			providers.Error{Status: 400, Type: "BadRequestError", Message: "too long"}},
		{"vllm older envelope", 404, `{"object":"error","message":"The model does not exist.","type":"NotFoundError","param":null,"code":404}`,
			providers.Error{Status: 404, Type: "not_found_error", Message: "The model does not exist."}},
		{"integer code that differs", 429, `{"error":{"message":"slow","type":"x","code":1001}}`,
			providers.Error{Status: 429, Type: "x", Code: "1001", Message: "slow"}},
		{"code equal to the status as a string is kept", 500, `{"error":{"message":"m","code":"500"}}`,
			providers.Error{Status: 500, Type: "server_error", Code: "500", Message: "m"}},
		{"openrouter metadata", 402, `{"error":{"message":"Insufficient credits","code":402,"metadata":{"provider_name":"x"}}}`,
			providers.Error{Status: 402, Type: "invalid_request_error", Message: "Insufficient credits"}},
		{"error as a string", 500, `{"error":"boom"}`, providers.Error{Status: 500, Type: "server_error", Message: "boom"}},
		{"error as an empty string", 502, `{"error":""}`, providers.Error{Status: 502, Type: "server_error", Message: "the provider answered Bad Gateway"}},
		{"message only", 503, `{"message":"overloaded"}`, providers.Error{Status: 503, Type: "server_error", Message: "overloaded"}},
		{"fastapi detail", 422, `{"detail":"field required"}`, providers.Error{Status: 422, Type: "invalid_request_error", Message: "field required"}},
		{"fastapi validation detail", 422, `{"detail":[{"loc":["body","model"],"msg":"field required","type":"value_error.missing"}]}`,
			providers.Error{Status: 422, Type: "invalid_request_error", Message: "the provider answered Unprocessable Entity"}},
		{"message before detail", 400, `{"detail":"d","message":"m"}`, providers.Error{Status: 400, Type: "invalid_request_error", Message: "m"}},
		{"html", 502, `<html><body>upstream secret-host.internal</body></html>`, providers.Error{Status: 502, Type: "server_error", Message: "the provider answered Bad Gateway"}},
		{"html after json", 503, `{"error":"x"}<html>`, providers.Error{Status: 503, Type: "server_error", Message: "the provider answered Service Unavailable"}},
		{"plain text", 500, `upstream connect error or disconnect/reset before headers`, providers.Error{Status: 500, Type: "server_error", Message: "the provider answered Internal Server Error"}},
		{"empty", 429, ``, providers.Error{Status: 429, Type: "rate_limit_error", Message: "the provider answered Too Many Requests"}},
		{"json string", 500, `"internal error"`, providers.Error{Status: 500, Type: "server_error", Message: "the provider answered Internal Server Error"}},
		{"json array", 400, `[{"message":"m"}]`, providers.Error{Status: 400, Type: "invalid_request_error", Message: "the provider answered Bad Request"}},
		{"json null", 404, `null`, providers.Error{Status: 404, Type: "not_found_error", Message: "the provider answered Not Found"}},
		{"type missing", 401, `{"error":{"message":"no key"}}`, providers.Error{Status: 401, Type: "authentication_error", Message: "no key"}},
		{"message missing", 403, `{"error":{"type":"permission_error"}}`, providers.Error{Status: 403, Type: "permission_error", Message: "the provider answered Forbidden"}},
		{"wrong types", 400, `{"error":{"message":{"text":"m"},"type":7,"param":["model"],"code":true}}`,
			providers.Error{Status: 400, Type: "invalid_request_error", Message: "the provider answered Bad Request"}},
		{"empty type", 404, `{"error":{"message":"m","type":""}}`, providers.Error{Status: 404, Type: "not_found_error", Message: "m"}},
		{"unnamed status", 520, `<html>cloudflare</html>`, providers.Error{Status: 520, Type: "server_error", Message: "the provider answered status 520"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Chat{}.Error(tc.status, nil, []byte(tc.body))
			if *got != tc.want {
				t.Errorf("got  %+v\nwant %+v", *got, tc.want)
			}
			if !gjson.Valid(tc.body) && strings.Contains(string(got.JSON()), "html") {
				t.Errorf("the HTML body leaks: %s", got.JSON())
			}
			checkErrorJSON(t, got.JSON())
		})
	}
}

// checkErrorJSON checks OpenAI's error shape: one key, error, holding
// exactly message and type (non-empty strings), param and code (string or
// null).
func checkErrorJSON(t *testing.T, out []byte) {
	t.Helper()
	var env map[string]map[string]any
	if err := json.Unmarshal(out, &env); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	e, ok := env["error"]
	if len(env) != 1 || !ok || len(e) != 4 {
		t.Fatalf("not OpenAI's error shape: %s", out)
	}
	for _, k := range []string{"message", "type"} {
		if s, ok := e[k].(string); !ok || s == "" {
			t.Fatalf("%s is not a non-empty string: %s", k, out)
		}
	}
	for _, k := range []string{"param", "code"} {
		if v, ok := e[k]; !ok || v != nil {
			if _, ok := v.(string); !ok {
				t.Fatalf("%s is neither a string nor null: %s", k, out)
			}
		}
	}
}

// FuzzError checks that any failed answer maps to OpenAI's error shape,
// and that a body that is not JSON never reaches the client.
func FuzzError(f *testing.F) {
	f.Add(400, []byte(`{"error":{"message":"m","type":"t","code":5}}`))
	f.Add(422, []byte(`{"detail":[{"msg":"x"}]}`))
	f.Add(500, []byte(`{"error":"boom"}`))
	f.Add(503, []byte(`{"message":"m\u2028\ud800"}`))
	f.Add(502, []byte(`<html>`))
	f.Add(520, []byte{})
	f.Add(404, []byte("{\"error\":{\"message\":\"\xff\",\"type\":\"\x7f\",\"code\":-0.0e1,\"param\":\"p\"}}"))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		status = 400 + (status%200+200)%200
		e := Chat{}.Error(status, nil, body)
		if e.Status != status {
			t.Fatalf("status %d, want %d", e.Status, status)
		}
		out := e.JSON()
		if !json.Valid(out) {
			t.Fatalf("invalid JSON %q", out)
		}
		checkErrorJSON(t, out)
		if !json.Valid(body) && !strings.HasPrefix(e.Message, "the provider answered ") {
			t.Fatalf("message %q from a body that is not JSON", e.Message)
		}
	})
}

// FuzzChatRequest checks that a body ValidateChat accepts is JSON by
// encoding/json's rules too, and translates into valid JSON in which only
// the model changed and that every JSON reader sees the new model in, even
// one that keeps the last of duplicate keys.
func FuzzChatRequest(f *testing.F) {
	files, _ := filepath.Glob(testdata + "*.json")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b, "gpt-4o")
	}
	f.Add([]byte(`{"model":"a","messages":[{"role":"user","content":"hi"}]}`), "b\"c")
	f.Add([]byte(`{"model":"a","messages":[{"role":"user","content":"hi"}]}`), "a")
	f.Add([]byte(`{"model":"a","messages":[{"role":"user","content":"hi"}],"model":"b"}`), "a")
	f.Add([]byte(`{"model":"a","messages":[{"role":"user","content":"hi"}],"mod\u0065l":"b"}`), "c")
	f.Add([]byte(`{"messages":[{"role":"user","content":"\u2028"}],"model":"\u00e9"}`), "é")
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		info, err := providers.ValidateChat(body)
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("ValidateChat accepts what encoding/json does not: %q", body)
		}
		orig := bytes.Clone(body)
		req, err := Chat{}.ChatRequest(body, model)
		if err != nil {
			t.Fatalf("ChatRequest: %v", err)
		}
		if !bytes.Equal(body, orig) {
			t.Fatal("ChatRequest changed its input")
		}
		if !json.Valid(req.Body) {
			t.Fatalf("invalid JSON %q", req.Body)
		}
		if model == info.Model {
			if &req.Body[0] != &body[0] || len(req.Body) != len(body) {
				t.Fatal("an unchanged model must not copy the body")
			}
		} else {
			checkOnlyModel(t, body, req.Body, model)
		}
		// encoding/json keeps the last of duplicate keys.
		var top map[string]any
		if err := json.Unmarshal(req.Body, &top); err != nil {
			t.Fatal(err)
		}
		if want := string([]rune(model)); top["model"] != want {
			t.Fatalf("model %q, want %q in %s", top["model"], want, req.Body)
		}
	})
}

func BenchmarkChatRequest(b *testing.B) {
	body, err := os.ReadFile(testdata + "long.unified.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, model string }{
		{"changed", "gpt-4o-2024-08-06"},
		{"unchanged", "travel"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := (Chat{}).ChatRequest(body, bc.model); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidateChat validates the same 2 KB request, as the gateway
// does before ChatRequest.
func BenchmarkValidateChat(b *testing.B) {
	body, err := os.ReadFile(testdata + "long.unified.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := providers.ValidateChat(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestChatRequestAsSjson checks that the model replaced in place gives
// the bytes sjson.SetBytes gives, which ChatRequest wrote before.
func TestChatRequestAsSjson(t *testing.T) {
	long, err := os.ReadFile(testdata + "long.unified.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		string(long),
		`{"model":"a","messages":[]}`,
		`{"messages":[],"model":"a"}`,
		` { "model" : "oa/gpt-4o" , "messages" : [ ] } `,
		`{"model":"oa\/gpt\u002d4o","messages":[]}`,
		`{"mod\u0065l":"a","model":"b"}`,
		`{"model":"a","messages":[],"model":"b"}`,
		`{"x":{"model":"inner"},"model":"outer"}`,
		`{"model":"","messages":[]}`,
		`{"messages":[]}`,
		`{"model":1}`,
	} {
		for _, model := range []string{"gpt-4o-mini", "b", "a/b c", "é", `b"c`, "a<b>&", "", "x\u2028"} {
			want, err := sjson.SetBytes([]byte(body), "model", model)
			if err != nil {
				t.Fatal(err)
			}
			if gjson.Get(body, "model").Str == model {
				want = []byte(body)
			}
			req, err := Chat{}.ChatRequest([]byte(body), model)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(req.Body, want) {
				t.Errorf("model %q in %s:\n got %s\nwant %s", model, body, req.Body, want)
			}
		}
	}
}

// TestChatRequestCacheControl checks that prompt caching markers, which
// the hub carries for requests that came through the Messages or
// Responses API, are left out for OpenAI and the servers that refuse
// them, and passed on where the translator is told the server reads them.
func TestChatRequestCacheControl(t *testing.T) {
	const marked = `{"model":"m","messages":[` +
		`{"role":"system","content":[{"type":"text","text":"rules","cache_control":{"type":"ephemeral"}}]},` +
		`{"role":"user","content":"hi","cache_control":{"type":"ephemeral","ttl":"1h"}},` +
		`{"role":"tool","tool_call_id":"c","content":"out","cache_control":{"type":"ephemeral"}}],` +
		`"tools":[{"type":"function","function":{"name":"f","description":"cache_control"},"cache_control":{"type":"ephemeral"}}]}`
	const stripped = `{"model":"x","messages":[` +
		`{"role":"system","content":[{"type":"text","text":"rules"}]},` +
		`{"role":"user","content":"hi"},` +
		`{"role":"tool","tool_call_id":"c","content":"out"}],` +
		`"tools":[{"type":"function","function":{"name":"f","description":"cache_control"}}]}`
	tests := []struct {
		name string
		chat Chat
		in   string
		want string
	}{
		{"markers left out", Chat{}, marked, stripped},
		{"markers kept for a server that reads them", Chat{CacheControl: true}, marked, strings.Replace(marked, `"model":"m"`, `"model":"x"`, 1)},
		{"the word elsewhere only", Chat{}, `{"model":"m","messages":[{"role":"user","content":"what is \"cache_control\"?"}]}`, `{"model":"x","messages":[{"role":"user","content":"what is \"cache_control\"?"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			req, err := tt.chat.ChatRequest(in, "x")
			if err != nil {
				t.Fatal(err)
			}
			if string(req.Body) != tt.want {
				t.Errorf("body:\n got %s\nwant %s", req.Body, tt.want)
			}
			if string(in) != tt.in {
				t.Errorf("the client's body changed: %s", in)
			}
			if !json.Valid(req.Body) {
				t.Errorf("invalid JSON: %s", req.Body)
			}
		})
	}
}
