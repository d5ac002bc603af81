package anthropic

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/sse"
)

const sseDir = "../../testdata/sse/anthropic"

// separator divides a transcript's upstream stream from the expected
// unified stream.
const separator = "----------"

// readTranscript splits testdata/sse/anthropic/<name>.txt. Transcripts whose
// name contains "include_usage" are translated with IncludeUsage.
func readTranscript(t testing.TB, path string) (upstream, want []byte, opts providers.StreamOptions) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte("\n"+separator+"\n"))
	if i < 0 {
		t.Fatalf("%s: no %q line", path, separator)
	}
	upstream, want = data[:i+1], data[i+len(separator)+2:]
	opts.IncludeUsage = strings.Contains(filepath.Base(path), "include_usage")
	return upstream, want, opts
}

// translate feeds upstream to a new translator in pieces of random sizes
// (rng nil: all at once), framing events with sse.Cut as the gateway does,
// and returns the unified stream. It stops at the first Event error.
func translate(c Chat, opts providers.StreamOptions, upstream []byte, rng *rand.Rand) ([]byte, error) {
	tr := c.ChatStream(opts)
	var out, buf []byte
	for len(upstream) > 0 {
		n := len(upstream)
		if rng != nil {
			n = min(n, 1+rng.IntN(64))
		}
		buf = append(buf, upstream[:n]...)
		upstream = upstream[n:]
		for {
			event, rest, ok := sse.Cut(buf)
			if !ok {
				break
			}
			var err error
			if out, err = tr.Event(out, event); err != nil {
				return out, err
			}
			buf = rest
		}
	}
	// sse.Cut cannot tell a final "\r\r" from a "\r" followed by "\n"
	// still to come, so at the end of the body a trailing "\r" completes
	// the line.
	if bytes.HasSuffix(buf, []byte("\r")) {
		if event, _, ok := sse.Cut(append(buf, '\n')); ok {
			var err error
			if out, err = tr.Event(out, event); err != nil {
				return out, err
			}
		}
	}
	return tr.Close(out), nil
}

func TestStreamTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(sseDir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in %s (%v)", sseDir, err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			upstream, want, opts := readTranscript(t, path)
			got, err := translate(testChat, opts, upstream, nil)
			if err != nil {
				t.Fatalf("Event: %v", err)
			}
			if *update {
				data := append(append(upstream, separator+"\n"...), got...)
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			checkUnifiedStream(t, got)
			if !bytes.Equal(got, want) {
				t.Fatalf("unified stream differs\ngot:\n%s\nwant:\n%s", got, want)
			}

			// Framing must not matter: random chunk sizes, one byte at a
			// time, and every line-ending style SSE allows.
			rng := rand.New(rand.NewPCG(1, uint64(len(upstream))))
			for range 50 {
				if got, err := translate(testChat, opts, upstream, rng); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("random chunking changed the output (err %v):\n%s", err, got)
				}
			}
			lf := bytes.ReplaceAll(upstream, []byte("\r\n"), []byte("\n"))
			for _, nl := range []string{"\n", "\r\n", "\r"} {
				in := bytes.ReplaceAll(lf, []byte("\n"), []byte(nl))
				if got, err := translate(testChat, opts, in, rng); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("line ending %q changed the output (err %v):\n%s", nl, err, got)
				}
			}
		})
	}
}

// checkUnifiedStream checks that out is a sequence of well-formed unified
// events: single data lines, each a JSON object or [DONE], with [DONE] or an
// error last, and chunks sharing id and created.
func checkUnifiedStream(t testing.TB, out []byte) {
	t.Helper()
	if err := validUnifiedStream(out); err != "" {
		t.Fatalf("%s\nstream:\n%s", err, out)
	}
	var id, created string
	for _, ev := range bytes.SplitAfter(out, []byte("\n\n")) {
		data := bytes.TrimSuffix(bytes.TrimPrefix(ev, []byte("data: ")), []byte("\n\n"))
		if len(data) == 0 || data[0] != '{' {
			continue
		}
		var chunk struct {
			ID      json.RawMessage `json:"id"`
			Created json.RawMessage `json:"created"`
			Error   json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			t.Fatal(err)
		}
		if chunk.Error != nil {
			continue
		}
		if id == "" {
			id, created = string(chunk.ID), string(chunk.Created)
		} else if string(chunk.ID) != id || string(chunk.Created) != created {
			t.Errorf("chunks disagree on id or created: %s", data)
		}
	}
}

// validUnifiedStream describes what is wrong with a unified stream, or
// returns "".
func validUnifiedStream(out []byte) string {
	if len(out) == 0 {
		return "the stream is empty"
	}
	events := bytes.SplitAfter(out, []byte("\n\n"))
	if len(events[len(events)-1]) == 0 {
		events = events[:len(events)-1]
	}
	for i, ev := range events {
		if !bytes.HasPrefix(ev, []byte("data: ")) || !bytes.HasSuffix(ev, []byte("\n\n")) {
			return "malformed event " + strconvQuote(ev)
		}
		data := ev[len("data: ") : len(ev)-2]
		if bytes.ContainsAny(data, "\r\n") {
			return "event spans lines: " + strconvQuote(ev)
		}
		last := i == len(events)-1
		switch {
		case string(data) == "[DONE]":
			if !last {
				return "events follow [DONE]"
			}
		case !json.Valid(data):
			return "invalid JSON: " + strconvQuote(ev)
		case bytes.HasPrefix(data, []byte(`{"error":`)):
			if !last {
				return "events follow an error"
			}
		case last:
			return "the stream ends without [DONE] or an error"
		}
	}
	return ""
}

func strconvQuote(b []byte) string {
	q, _ := json.Marshal(string(b))
	return string(q)
}

func TestStreamMalformedEvent(t *testing.T) {
	for _, ev := range []string{
		"event: message_start\ndata: {\"type\":\"message_start\",",
		"data: [DONE]",
		"data: 42",
	} {
		tr := testChat.ChatStream(providers.StreamOptions{})
		if out, err := tr.Event(nil, []byte(ev)); err == nil {
			t.Errorf("Event(%q) = %q, want an error", ev, out)
		}
	}
}

func TestStreamEmptyEvents(t *testing.T) {
	tr := testChat.ChatStream(providers.StreamOptions{})
	for _, ev := range []string{"", ": comment", "event: ping", "id: 7\nretry: 100"} {
		out, err := tr.Event(nil, []byte(ev))
		if err != nil || len(out) != 0 {
			t.Errorf("Event(%q) = %q, %v; want nothing", ev, out, err)
		}
	}
	// Nothing came: the answer is incomplete.
	out := tr.Close(nil)
	want := `data: {"error":{"message":"the provider's stream ended before the answer was complete","type":"server_error","param":null,"code":"stream_incomplete"}}` + "\n\n"
	if string(out) != want {
		t.Errorf("Close = %q, want %q", out, want)
	}
}

func TestStreamErrorTypes(t *testing.T) {
	tests := []struct{ typ, wantType, wantCode string }{
		{"overloaded_error", "server_error", "overloaded"},
		{"api_error", "server_error", "api_error"},
		{"rate_limit_error", "rate_limit_error", "rate_limit_exceeded"},
		{"invalid_request_error", "invalid_request_error", "invalid_request_error"},
		{"something_new", "server_error", "something_new"},
		{"", "server_error", ""},
	}
	for _, tt := range tests {
		tr := testChat.ChatStream(providers.StreamOptions{IncludeUsage: true})
		ev := `event: error` + "\n" + `data: {"type":"error","error":{"type":"` + tt.typ + `","message":"m"}}`
		out, err := tr.Event(nil, []byte(ev))
		if err != nil {
			t.Fatal(err)
		}
		out = tr.Close(out)
		var got struct{ Error providers.Error }
		if err := json.Unmarshal(bytes.TrimPrefix(out, []byte("data: ")), &got); err != nil {
			t.Fatalf("%s: %v: %q", tt.typ, err, out)
		}
		if got.Error.Type != tt.wantType || got.Error.Code != tt.wantCode || got.Error.Message != "m" ||
			bytes.Count(out, []byte("data: ")) != 1 {
			t.Errorf("%s: got %q, want type %s code %s", tt.typ, out, tt.wantType, tt.wantCode)
		}
	}
}

// TestStreamNoMessageStart checks that content arriving without a
// message_start still makes well-formed chunks.
func TestStreamNoMessageStart(t *testing.T) {
	upstream := "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"data: {\"type\":\"content_block_delta\",\"index\":5,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n" +
		"data: {\"type\":\"message_stop\"}\n\n"
	out, err := translate(testChat, providers.StreamOptions{IncludeUsage: true}, []byte(upstream), nil)
	if err != nil {
		t.Fatal(err)
	}
	checkUnifiedStream(t, out)
	want := `data: {"id":"","object":"chat.completion.chunk","created":1750000000,"model":"","choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n" +
		`data: {"id":"","object":"chat.completion.chunk","created":1750000000,"model":"","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n" +
		`data: {"id":"","object":"chat.completion.chunk","created":1750000000,"model":"","choices":[],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}` + "\n\n" +
		"data: [DONE]\n\n"
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}
