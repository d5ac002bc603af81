package cohere

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
)

// FuzzChatRequest checks that every body ValidateChat accepts either
// translates into valid JSON or fails with a 4xx *providers.Error.
func FuzzChatRequest(f *testing.F) {
	translatortest.SeedFiles(f, requestDir, ".unified.json")
	f.Add([]byte(`{"model":"m","messages":[{"role":"assistant","content":null,"reasoning":"r","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"a\":[1,{}]}"}}]}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA","detail":"high"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{ }}}],"tool_choice":"required","top_k":3}`))

	providerkit.FuzzChatRequest(f, func(body []byte) (providers.Request, error) {
		return Chat{}.ChatRequest(body, "command-\"x\"")
	})
}

// FuzzChatResponse checks that any answer body translates into valid JSON
// or fails with an error, never a panic.
func FuzzChatResponse(f *testing.F) {
	translatortest.SeedFiles(f, responseDir, ".cohere.json")
	f.Add([]byte(`{"id":7,"finish_reason":["x"],"message":{"content":"x","tool_calls":{"id":1},"tool_plan":3},"usage":{"tokens":{"input_tokens":-1e400}},"logprobs":[{"logprobs":["a",1e308,1e308]}]}`))

	providerkit.FuzzChatResponse(f, Chat{}.ChatResponse)
}

// FuzzError checks that any error body maps to a well-formed error.
func FuzzError(f *testing.F) {
	f.Add(400, []byte(`{"message":"too many tokens: …"}`))
	f.Add(498, []byte(`<html>`))
	f.Add(429, []byte(`{"error":{"message":7}}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := Chat{}.Error(status, http.Header{}, body)
		if e == nil || e.Message == "" || e.Type == "" || !json.Valid(e.JSON()) {
			t.Fatalf("Error(%d, %q) = %+v", status, body, e)
		}
	})
}

// FuzzStream feeds arbitrary bytes, framed by sse.Cut, through a stream
// translator and checks that what comes out is a well-formed unified stream.
func FuzzStream(f *testing.F) {
	translatortest.SeedTranscripts(f, sseDir)
	f.Add([]byte("data: {\"type\":\"tool-call-start\",\"index\":-1,\"delta\":{\"message\":{\"tool_calls\":[{\"id\":7,\"function\":{\"name\":null}}]}}}\n\n"), false)
	f.Add([]byte("data: {\"type\":\"content-delta\",\"logprobs\":{\"text\":\"\\u00ff\",\"logprobs\":[1e308,1e308]}}\n\n"), true)

	translatortest.Replay{New: Chat{}.ChatStream}.Fuzz(f)
}

// FuzzEmbeddingsRequest checks that every body ValidateEmbeddings accepts
// either translates into Cohere requests of valid JSON holding every input
// once, in order, or fails with a 4xx *providers.Error.
func FuzzEmbeddingsRequest(f *testing.F) {
	translatortest.SeedFiles(f, embedDir, ".unified.json")
	f.Add([]byte(`{"model":"m","input":[[1,2]],"dimensions":7}`))
	f.Add([]byte(`{"model":"m","input":"\u0000\"\\","input_type":"\ud800"}`))
	f.Add([]byte("{\"model\":\"m\",\"input\":[\"\xbc\\u2028\",\"a\xff\xfeb\"]}"))

	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := providers.ValidateEmbeddings(body)
		if err != nil {
			return
		}
		reqs, err := Embeddings{}.EmbeddingsRequests(&req, "embed-\"v4\"")
		if err != nil {
			var e *providers.Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status >= 500 {
				t.Fatalf("EmbeddingsRequests error %v is not a 4xx *providers.Error", err)
			}
			return
		}
		var texts []string
		for _, r := range reqs {
			if !json.Valid(r.Body) || r.Path != EmbedPath {
				t.Fatalf("invalid request for %s: %s %s", body, r.Path, r.Body)
			}
			var v struct{ Texts []string }
			if err := json.Unmarshal(r.Body, &v); err != nil || len(v.Texts) == 0 || len(v.Texts) > MaxEmbedTexts {
				t.Fatalf("texts of %s: %v", r.Body, err)
			}
			texts = append(texts, v.Texts...)
		}
		if len(texts) != len(req.Texts) {
			t.Fatalf("%d texts sent for %d inputs", len(texts), len(req.Texts))
		}
		for i := range texts {
			if want := replaceInvalidUTF8(req.Texts[i]); texts[i] != want {
				t.Fatalf("input %d sent as %q, want %q", i, texts[i], want)
			}
		}
	})
}

// replaceInvalidUTF8 replaces each byte of s that is not UTF-8 with
// U+FFFD, as providers.AppendString writes it.
func replaceInvalidUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // RuneError for an invalid byte
		i += size
	}
	return b.String()
}

// FuzzEmbeddingsResponse checks that any answer body is read as vectors
// of numbers or refused with an error, never a panic, and that a read
// answer writes a valid unified answer.
func FuzzEmbeddingsResponse(f *testing.F) {
	translatortest.SeedFiles(f, embedResponseDir, ".cohere.json")
	f.Add([]byte(`{"embeddings":{"float":[[1e308]],"base64":["AAAA"]},"meta":{"billed_units":{"input_tokens":-1e400}}}`))

	f.Fuzz(func(t *testing.T, body []byte) {
		var res providers.EmbeddingsResult
		if err := (Embeddings{}).EmbeddingsResponse(0, http.Header{}, body, &res); err != nil {
			return
		}
		if len(res.Vectors) == 0 || res.PromptTokens < 0 {
			t.Fatalf("read %d vectors, %d tokens from %s", len(res.Vectors), res.PromptTokens, body)
		}
		req := providers.EmbeddingsRequest{Model: "m", Texts: make([]string, len(res.Vectors))}
		for _, b64 := range []bool{false, true} {
			req.Base64 = b64
			out, ok := providers.EmbeddingsAnswer(nil, &req, &res)
			if !ok || !json.Valid(out) {
				t.Fatalf("answer for %s: %s", body, out)
			}
		}
	})
}
