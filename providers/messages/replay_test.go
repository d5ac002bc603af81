package messages

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/modelgate/modelgate/providers/sse"
)

// A stored Message replayed as a stream reads, in anthropic-sdk-go's
// accumulator, as the Message: its id, model, every block (text and
// citations, thinking and signature, tool input, a server tool's result),
// the stop reason and the usage.
func TestReplay(t *testing.T) {
	files, _ := filepath.Glob(responseDir + "/*.messages.json")
	files = append(files, "testdata/replay/server_tools.messages.json")
	if len(files) < 10 {
		t.Fatalf("%d answers", len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".messages.json"), func(t *testing.T) {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Replay(nil, body)
			if err != nil {
				t.Fatal(err)
			}
			var got anthropic.Message
			n := 0
			for rest := out; ; {
				ev, r, ok := sse.Cut(rest)
				if !ok {
					if len(r) != 0 {
						t.Fatalf("trailing bytes %q", r)
					}
					break
				}
				rest = r
				name, data := sse.Fields(ev)
				var e anthropic.MessageStreamEventUnion
				if err := json.Unmarshal(data, &e); err != nil {
					t.Fatalf("%s: %v", data, err)
				}
				if e.Type != string(name) {
					t.Fatalf("event %s carries type %s", name, e.Type)
				}
				if err := got.Accumulate(e); err != nil {
					t.Fatalf("Accumulate %s: %v", data, err)
				}
				n++
			}
			if n < 3 {
				t.Fatalf("%d events", n)
			}
			var want anthropic.Message
			if err := json.Unmarshal(body, &want); err != nil {
				t.Fatal(err)
			}
			if got.ID != want.ID || got.Model != want.Model || got.StopReason != want.StopReason || got.StopSequence != want.StopSequence {
				t.Errorf("head: %s %s %s %q, want %s %s %s %q", got.ID, got.Model, got.StopReason, got.StopSequence,
					want.ID, want.Model, want.StopReason, want.StopSequence)
			}
			if got.Usage.InputTokens != want.Usage.InputTokens || got.Usage.OutputTokens != want.Usage.OutputTokens ||
				got.Usage.CacheReadInputTokens != want.Usage.CacheReadInputTokens ||
				got.Usage.CacheCreationInputTokens != want.Usage.CacheCreationInputTokens ||
				got.Usage.CacheCreation.Ephemeral1hInputTokens != want.Usage.CacheCreation.Ephemeral1hInputTokens {
				t.Errorf("usage %+v\nwant %+v", got.Usage, want.Usage)
			}
			if len(got.Content) != len(want.Content) {
				t.Fatalf("%d blocks, want %d", len(got.Content), len(want.Content))
			}
			for i := range want.Content {
				g, w := got.Content[i], want.Content[i]
				if g.Type != w.Type || g.Text != w.Text || g.Thinking != w.Thinking || g.Signature != w.Signature ||
					g.ID != w.ID || g.Name != w.Name || g.Data != w.Data || len(g.Citations) != len(w.Citations) {
					t.Errorf("block %d: %+v\nwant %+v", i, g, w)
				}
				if w.Type == "tool_use" || w.Type == "server_tool_use" {
					if !sameJSON(t, g.Input, w.Input) {
						t.Errorf("block %d input %s, want %s", i, g.Input, w.Input)
					}
				}
				if w.Type == "web_search_tool_result" && !sameJSON(t, []byte(g.RawJSON()), []byte(w.RawJSON())) {
					t.Errorf("block %d: %s\nwant %s", i, g.RawJSON(), w.RawJSON())
				}
			}
		})
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return reflect.DeepEqual(x, y)
}

func TestReplayRefuses(t *testing.T) {
	for _, bad := range []string{``, `{}`, `{"type":"error","error":{}}`, `{"type":"message","content":{}}`, `[`} {
		if out, err := Replay([]byte("x"), []byte(bad)); err == nil || string(out) != "x" {
			t.Errorf("%q: %q, %v", bad, out, err)
		}
	}
	// Every event's data is one line: a stored answer's layout does not
	// reach the stream.
	out, err := Replay(nil, []byte("{\n \"id\": \"msg_1\",\n \"type\": \"message\",\n \"content\": [\n  {\"type\": \"tool_use\", \"id\": \"t\", \"name\": \"n\", \"input\": {\n \"a\": [1,\n 2]}}],\n \"usage\": {\n \"output_tokens\": 1}}"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if line != "" && !strings.HasPrefix(line, "event: ") && !strings.HasPrefix(line, "data: {") {
			t.Fatalf("a stray line %q in\n%s", line, out)
		}
	}
}
