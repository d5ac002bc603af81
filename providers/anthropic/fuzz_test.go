package anthropic

import (
	"encoding/json"
	"errors"
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
	f.Add([]byte(`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"a\":[1,{}]}"}}]}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{ }}}],"tool_choice":"required"}`))

	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := providers.ValidateChat(body); err != nil {
			return
		}
		req, err := Chat{}.ChatRequest(body, "claude-\"x\"")
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

// FuzzStream feeds arbitrary bytes, framed by sse.Cut, through a stream
// translator and checks that what comes out is a well-formed unified stream.
func FuzzStream(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(sseDir, "*.txt"))
	if err != nil {
		f.Fatal(err)
	}
	for _, path := range files {
		upstream, _, opts := readTranscript(f, path)
		f.Add(upstream, opts.IncludeUsage)
	}
	f.Add([]byte("data: {\"type\":\"content_block_start\",\"index\":-1,\"content_block\":{\"type\":\"tool_use\",\"id\":7,\"name\":null}}\n\n"), false)

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
