package cohere

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// FuzzChatRequest checks that every body ValidateChat accepts either
// translates into valid JSON or fails with a 4xx *providers.Error.
func FuzzChatRequest(f *testing.F) {
	for _, name := range goldenCases(f, requestDir, ".unified.json") {
		data, err := os.ReadFile(filepath.Join(requestDir, name+".unified.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"model":"m","messages":[{"role":"assistant","content":null,"reasoning":"r","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"a\":[1,{}]}"}}]}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA","detail":"high"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{ }}}],"tool_choice":"required","top_k":3}`))

	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := providers.ValidateChat(body); err != nil {
			return
		}
		req, err := Chat{}.ChatRequest(body, "command-\"x\"")
		if err != nil {
			var e *providers.Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status >= 500 {
				t.Fatalf("ChatRequest error %v is not a 4xx *providers.Error", err)
			}
			return
		}
		if !gjson.ValidBytes(req.Body) || !json.Valid(req.Body) {
			t.Fatalf("invalid JSON for %s:\n%s", body, req.Body)
		}
	})
}

// FuzzChatResponse checks that any answer body translates into valid JSON
// or fails with an error, never a panic.
func FuzzChatResponse(f *testing.F) {
	for _, name := range goldenCases(f, responseDir, ".cohere.json") {
		data, err := os.ReadFile(filepath.Join(responseDir, name+".cohere.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"id":7,"finish_reason":["x"],"message":{"content":"x","tool_calls":{"id":1},"tool_plan":3},"usage":{"tokens":{"input_tokens":-1e400}},"logprobs":[{"logprobs":["a",1e308,1e308]}]}`))

	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := Chat{}.ChatResponse(body)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON for %s:\n%s", body, out)
		}
	})
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
	for _, path := range transcripts(f) {
		upstream, _, opts := readTranscript(f, path)
		f.Add(upstream, opts.IncludeUsage)
	}
	f.Add([]byte("data: {\"type\":\"tool-call-start\",\"index\":-1,\"delta\":{\"message\":{\"tool_calls\":[{\"id\":7,\"function\":{\"name\":null}}]}}}\n\n"), false)
	f.Add([]byte("data: {\"type\":\"content-delta\",\"logprobs\":{\"text\":\"\\u00ff\",\"logprobs\":[1e308,1e308]}}\n\n"), true)

	f.Fuzz(func(t *testing.T, upstream []byte, includeUsage bool) {
		out, err := translate(Chat{}, providers.StreamOptions{IncludeUsage: includeUsage}, upstream, nil)
		if err != nil {
			// The gateway ends the stream with its own error here; what
			// was written so far must still be well-formed events.
			out = append(out, "data: {\"error\":{}}\n\n"...)
		}
		if msg := validUnifiedStream(out); msg != "" {
			t.Fatalf("%s\nupstream: %q\nunified:\n%s", msg, upstream, out)
		}
	})
}
