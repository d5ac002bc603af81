package messages

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

// TestRelay passes a Messages stream through as it is, however the
// provider's writes cut it, reading its usage from message_start and
// message_delta; a stream closed before message_stop gets Anthropic's
// error event.
func TestRelay(t *testing.T) {
	const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":4,\"cache_creation_input_tokens\":2,\"output_tokens\":1}}}\n\n"
	const delta = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n"
	const msgDelta = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":7}}\n\n"
	const stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, tc := range []struct {
		name, stream, wantError string
		usage                   providers.Used
	}{
		{"whole", start + delta + msgDelta + stop, "", providers.Used{Prompt: 16, Cached: 4, CacheWrite: 2, Completion: 7, Known: true}},
		{"ended, a stray line end and a comment", start + stop + "\n: x\n\n", "", providers.Used{Prompt: 16, Cached: 4, CacheWrite: 2, Completion: 1, Known: true}},
		{"ended by an error", start + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"o\"}}\n\n", "",
			providers.Used{Prompt: 16, Cached: 4, CacheWrite: 2, Completion: 1, Known: true}},
		{"cut", start + delta, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\"",
			providers.Used{Prompt: 16, Cached: 4, CacheWrite: 2, Completion: 1, Known: true}},
		{"nothing", "", "event: error\n", providers.Used{}},
	} {
		for cut := range max(len(tc.stream), 1) {
			r := NewRelay()
			got := translatortest.RelayWrites(r, tc.stream[:cut], tc.stream[cut:])
			rest, ok := strings.CutPrefix(got, strings.TrimRight(tc.stream, "\n"))
			rest = strings.TrimLeft(rest, "\n")
			if !ok || tc.wantError == "" && rest != "" || tc.wantError != "" && (!strings.Contains(rest, tc.wantError) || strings.Count(rest, "\n\n") != 1) {
				t.Fatalf("%s, cut at %d: the client got %q after the stream, want %q", tc.name, cut, rest, tc.wantError)
			}
			if r.Usage() != tc.usage {
				t.Fatalf("%s, cut at %d: usage %+v, want %+v", tc.name, cut, r.Usage(), tc.usage)
			}
		}
	}
}

// TestAnswerUsage reads a Message's usage: the prompt is the input with
// the cache's tokens.
func TestAnswerUsage(t *testing.T) {
	got := AnswerUsage([]byte(`{"id":"msg_1","type":"message","usage":{"input_tokens":10,"cache_read_input_tokens":4,"cache_creation_input_tokens":2,"output_tokens":7}}`))
	if want := (providers.Used{Prompt: 16, Cached: 4, CacheWrite: 2, Completion: 7, Known: true}); got != want {
		t.Errorf("usage %+v, want %+v", got, want)
	}
	got = AnswerUsage([]byte(`{"id":"msg_1","type":"message","usage":{"input_tokens":10,"cache_read_input_tokens":4,"cache_creation_input_tokens":3,"cache_creation":{"ephemeral_5m_input_tokens":2,"ephemeral_1h_input_tokens":1},"output_tokens":7}}`))
	if want := (providers.Used{Prompt: 17, Cached: 4, CacheWrite: 3, CacheWrite1h: 1, Completion: 7, Known: true}); got != want {
		t.Errorf("usage with one-hour writes %+v, want %+v", got, want)
	}
	if got := AnswerUsage([]byte(`{"id":"msg_1"}`)); got.Known {
		t.Errorf("a Message without usage: %+v", got)
	}
}

// FuzzReadUsage: on any valid JSON, ReadUsage reads what lookups by path
// read (readUsageReference), over the counts an earlier event left; on
// anything, it does not panic.
func FuzzReadUsage(f *testing.F) {
	f.Add(`{"input_tokens":14,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens":10,"cache_creation":{"ephemeral_5m_input_tokens":2}}`)
	f.Add(`{"input_tokens":14,"cache_creation_input_tokens":5,"output_tokens":10,"cache_creation":{"ephemeral_5m_input_tokens":2,"ephemeral_1h_input_tokens":3}}`)
	f.Add(`{"input_tokens":14,"cache_creation":null,"cache_creation":{"ephemeral_1h_input_tokens":3}}`)
	f.Add(`{"output_tokens":"7","input_tokens":null,"output_tokens":1}`)
	earlier := providers.Used{Prompt: 1, Cached: 2, CacheWrite: 3, CacheWrite1h: 1, Completion: 4, Known: true}
	f.Fuzz(func(t *testing.T, usage string) {
		got := earlier
		ReadUsage(gjson.Parse(usage), &got)
		if !gjson.Valid(usage) {
			return
		}
		want := earlier
		readUsageReference(gjson.Parse(usage), &want)
		if got != want {
			t.Fatalf("%s: %+v, want %+v", usage, got, want)
		}
	})
}

// readUsageReference is ReadUsage done with gjson's lookups.
func readUsageReference(v gjson.Result, u *providers.Used) {
	if !v.IsObject() {
		return
	}
	u.Known = true
	if x := v.Get("input_tokens"); x.Exists() {
		read, write := v.Get("cache_read_input_tokens"), v.Get("cache_creation_input_tokens")
		if read.Exists() {
			u.Cached = read.Int()
		}
		if write.Exists() {
			u.CacheWrite = write.Int()
		}
		if c := v.Get("cache_creation"); c.Exists() {
			u.CacheWrite1h = c.Get("ephemeral_1h_input_tokens").Int()
		}
		u.Prompt = x.Int() + u.Cached + u.CacheWrite
	}
	if x := v.Get("output_tokens"); x.Exists() {
		u.Completion = x.Int()
	}
}
