package gemini

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// FuzzChatRequest checks that every body ValidateChat accepts either
// translates into valid JSON, on both services, or fails with a 4xx
// *providers.Error.
func FuzzChatRequest(f *testing.F) {
	for _, name := range goldenCases(f, requestDir, ".unified.json") {
		f.Add(readFile(f, filepath.Join(requestDir, name+".unified.json")), "gemini-3-flash-preview")
	}
	f.Add([]byte(`{"model":"m","messages":[{"role":"assistant","content":null,"thinking_blocks":[{"type":"thinking","thinking":"","signature":"\"x"}],"tool_calls":[{"id":"a__thought__-_","function":{"name":"f","arguments":"{\"a\":[1,{}]}"}}]},{"role":"tool","tool_call_id":"a__thought__-_","content":"[1"}]}`), "gemini-2.5-pro")
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}},{"type":"file","file":{"file_data":"data:application/pdf;base64,AA"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{ }}}],"tool_choice":"required","reasoning_effort":"minimal","n":2,"seed":-1}`), "models/gemini-3-pro")

	f.Fuzz(func(t *testing.T, body []byte, model string) {
		if _, err := providers.ValidateChat(body); err != nil {
			return
		}
		for _, c := range []Chat{{}, {Vertex: true, Project: "p", Location: "us-central1"}} {
			req, err := c.ChatRequest(body, model)
			if err != nil {
				var e *providers.Error
				if !errors.As(err, &e) || e.Status < 400 || e.Status >= 500 {
					t.Fatalf("ChatRequest error %v is not a 4xx *providers.Error", err)
				}
				continue
			}
			if !gjson.ValidBytes(req.Body) || !json.Valid(req.Body) {
				t.Fatalf("invalid JSON for %s:\n%s", body, req.Body)
			}
			if !validSegment(model) && !json.Valid([]byte(`"`+req.Path+`"`)) {
				t.Fatalf("path %q", req.Path)
			}
		}
	})
}

// FuzzChatResponse checks that any answer body translates into valid JSON
// or an error.
func FuzzChatResponse(f *testing.F) {
	for _, name := range goldenCases(f, responseDir, ".gemini.json") {
		f.Add(readFile(f, filepath.Join(responseDir, name+".gemini.json")))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := Chat{}.ChatResponse(body)
		if err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON for %s:\n%s", body, out)
		}
	})
}

// FuzzStream feeds arbitrary bytes, cut by Gemini's framing, through a
// stream translator and checks that what comes out is a well-formed unified
// stream.
func FuzzStream(f *testing.F) {
	for _, path := range transcripts(f) {
		upstream, _, opts := readTranscript(f, path)
		f.Add(upstream, opts.IncludeUsage)
	}
	f.Add([]byte("data: {\"candidates\":[{\"index\":-1,\"content\":{\"parts\":[{\"functionCall\":{\"name\":7,\"args\":[]},\"thoughtSignature\":\"\\\"\"}]}},{\"index\":99999999999}]}\n\n"), false)
	f.Add([]byte("{\"error\":{\"code\":\"x\"}}\n[1,{]"), true)

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

// FuzzError checks that any error answer maps to a 4xx or 5xx error whose
// JSON is valid.
func FuzzError(f *testing.F) {
	f.Add(429, []byte(`{"error":{"code":429,"message":"m","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1e400s"}]}}`))
	f.Add(400, []byte(`[{"error":{"code":400,"message":"API key not valid","status":"INVALID_ARGUMENT","details":[{"@type":"google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}]`))
	f.Add(200, []byte(`<html>`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := Chat{}.Error(status, nil, body)
		if e.Status < 400 || e.Status > 599 || e.Message == "" || e.RetryAfter < 0 || !json.Valid(e.JSON()) {
			t.Fatalf("Error(%d, %q) = %+v", status, body, e)
		}
	})
}
