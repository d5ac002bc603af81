package openai

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// TestChatRequestGolden translates testdata/providers/openai/<case>.unified.json
// for the model of <case>.openai.json and expects exactly that file: only
// "model" changes, every other byte (order, spacing, unknown fields) stays.
func TestChatRequestGolden(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/providers/openai/*.unified.json")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".unified.json")
		t.Run(name, func(t *testing.T) {
			in, _ := os.ReadFile(f)
			want, err := os.ReadFile(strings.TrimSuffix(f, ".unified.json") + ".openai.json")
			if err != nil {
				t.Fatal(err)
			}
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
		})
	}
}

func TestChatRequestUnchangedModel(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	req, _ := Chat{}.ChatRequest(body, "gpt-4o")
	if &req.Body[0] != &body[0] {
		t.Error("an unchanged model must not copy the body")
	}
	// One allocation: gjson's copy of the model it looks up.
	if n := testing.AllocsPerRun(100, func() { _, _ = Chat{}.ChatRequest(body, "gpt-4o") }); n > 1 {
		t.Errorf("%v allocations for an unchanged model", n)
	}
}

func TestErrorFromBody(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   providers.Error
	}{
		{"openai", 400, `{"error":{"message":"bad model","type":"invalid_request_error","param":"model","code":"model_not_found"}}`,
			providers.Error{Status: 400, Type: "invalid_request_error", Param: "model", Code: "model_not_found", Message: "bad model"}},
		{"vllm integer code", 400, `{"error":{"message":"too long","type":"BadRequestError","param":null,"code":400}}`,
			providers.Error{Status: 400, Type: "BadRequestError", Message: "too long"}},
		{"integer code that differs", 429, `{"error":{"message":"slow","type":"x","code":1001}}`,
			providers.Error{Status: 429, Type: "x", Code: "1001", Message: "slow"}},
		{"error as a string", 500, `{"error":"boom"}`, providers.Error{Status: 500, Type: "server_error", Message: "boom"}},
		{"message only", 503, `{"message":"overloaded"}`, providers.Error{Status: 503, Type: "server_error", Message: "overloaded"}},
		{"fastapi detail", 422, `{"detail":"field required"}`, providers.Error{Status: 422, Type: "invalid_request_error", Message: "field required"}},
		{"html", 502, `<html><body>upstream secret-host.internal</body></html>`, providers.Error{Status: 502, Type: "server_error", Message: "the provider answered Bad Gateway"}},
		{"empty", 429, ``, providers.Error{Status: 429, Type: "rate_limit_error", Message: "the provider answered Too Many Requests"}},
		{"type missing", 401, `{"error":{"message":"no key"}}`, providers.Error{Status: 401, Type: "authentication_error", Message: "no key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Chat{}.Error(tc.status, []byte(tc.body))
			if *got != tc.want {
				t.Errorf("got %+v\nwant %+v", *got, tc.want)
			}
		})
	}
}

func FuzzError(f *testing.F) {
	f.Add(400, []byte(`{"error":{"message":"m","type":"t","code":5}}`))
	f.Add(502, []byte(`<html>`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		status = 400 + (status%200+200)%200
		out := Chat{}.Error(status, body).JSON()
		if !json.Valid(out) {
			t.Fatalf("invalid JSON %q", out)
		}
		if e := gjson.GetBytes(out, "error"); e.Get("message").Str == "" || !e.Get("code").Exists() || !e.Get("param").Exists() {
			t.Fatalf("incomplete error %s", out)
		}
	})
}

func FuzzChatRequest(f *testing.F) {
	files, _ := filepath.Glob("../../testdata/providers/openai/*.unified.json")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b, "gpt-4o")
	}
	f.Add([]byte(`{"model":"a","messages":[{"role":"user","content":"hi"}]}`), "b\"c")
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		if _, err := providers.ValidateChat(body); err != nil {
			return
		}
		req, err := Chat{}.ChatRequest(body, model)
		if err != nil {
			return // sjson refuses some models' paths; never a panic
		}
		if !gjson.ValidBytes(req.Body) {
			t.Fatalf("invalid JSON %q", req.Body)
		}
		if got := gjson.GetBytes(req.Body, "model").Str; got != model && strings.ToValidUTF8(model, "") == model {
			t.Fatalf("model %q, want %q", got, model)
		}
	})
}

func BenchmarkChatRequest(b *testing.B) {
	body, err := os.ReadFile("../../testdata/providers/openai/tools.unified.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := (Chat{}).ChatRequest(body, "gpt-4o-2024-08-06"); err != nil {
			b.Fatal(err)
		}
	}
}
