package gemini

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
)

// FuzzChatRequest checks that every body ValidateChat accepts either
// translates into valid JSON, on both services, or fails with a 4xx
// *providers.Error.
func FuzzChatRequest(f *testing.F) {
	for _, name := range translatortest.GoldenCases(f, requestDir, ".unified.json") {
		f.Add(translatortest.ReadFile(f, filepath.Join(requestDir, name+".unified.json")), "gemini-3-flash-preview")
	}
	f.Add([]byte(`{"model":"m","messages":[{"role":"assistant","content":null,"thinking_blocks":[{"type":"thinking","thinking":"","signature":"\"x"}],"tool_calls":[{"id":"a__thought__-_","function":{"name":"f","arguments":"{\"a\":[1,{}]}"}}]},{"role":"tool","tool_call_id":"a__thought__-_","content":"[1"}]}`), "gemini-2.5-pro")
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}},{"type":"file","file":{"file_data":"data:application/pdf;base64,AA"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{ }}}],"tool_choice":"required","reasoning_effort":"minimal","n":2,"seed":-1}`), "models/gemini-3-pro")

	f.Fuzz(func(t *testing.T, body []byte, model string) {
		if _, err := providers.ValidateChat(body); err != nil {
			return
		}
		for _, c := range []Chat{{}, {Vertex: true, Project: "p", Location: "us-central1"}} {
			req, err := c.ChatRequest(body, model)
			if !providerkit.CheckFuzzedRequest(t, body, req, err) {
				continue
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
	translatortest.SeedFiles(f, responseDir, ".gemini.json")
	providerkit.FuzzChatResponse(f, Chat{}.ChatResponse)
}

// FuzzStream feeds arbitrary bytes, cut by Gemini's framing, through a
// stream translator and checks that what comes out is a well-formed unified
// stream.
func FuzzStream(f *testing.F) {
	translatortest.SeedTranscripts(f, sseDir)
	f.Add([]byte("data: {\"candidates\":[{\"index\":-1,\"content\":{\"parts\":[{\"functionCall\":{\"name\":7,\"args\":[]},\"thoughtSignature\":\"\\\"\"}]}},{\"index\":99999999999}]}\n\n"), false)
	f.Add([]byte("{\"error\":{\"code\":\"x\"}}\n[1,{]"), true)

	translatortest.Replay{New: Chat{}.ChatStream, Framing: Framing}.Fuzz(f)
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
