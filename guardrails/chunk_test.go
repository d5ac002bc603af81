package guardrails

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"
	"testing"
)

// chunkEvents are chat streams, one event a line, of the shapes providers
// send and a few they do not.
var chunkEvents = []string{
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}
{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"mail bob@exa"},"logprobs":null,"finish_reason":null}],"usage":null}
{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"mple.com now"},"logprobs":null,"finish_reason":null}],"usage":null}
{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}
{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
	`{"choices":[{"index":1,"delta":{"refusal":"no, +1 202 "}}]}
{"choices":[{"index":1,"delta":{"refusal":"555 0173"},"finish_reason":"content_filter"}]}
{"choices":[{"delta":{"content":"x"},"index":0}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a\u0040b.c","content":"om"}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ip\":\"10.0."}}]}}]}
{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"0.1\"}"}}]},"finish_reason":"tool_calls"}]}`,
	`{"choices":[{"index":0,"delta":{"content":"call me"}}], "x":1}
{"choices":[{"index":0,"delta":{"content":" at 4111 1111 "}}]}
{"choices":[{"index":00,"delta":{"content":"1111 1111"}}]}
{"choices":[{"index":0,"index":2,"delta":{"content":"!"},"finish_reason":"stop"}]}`,
}

// sameStream passes events through a stream reading chunks in one pass
// and one walking them all, and fails where they differ.
func sameStream(t *testing.T, e *Engine, events []string) {
	t.Helper()
	ctx := context.Background()
	fast, walk := e.AnswerStream(Chat, nil), e.AnswerStream(Chat, nil)
	walk.walkChunks = true
	for i := 0; i <= len(events); i++ {
		var got, want [][]byte
		var gd, wd *Decision
		if i < len(events) {
			got, gd = fast.Event(ctx, []byte(events[i]))
			want, wd = walk.Event(ctx, []byte(events[i]))
		} else {
			got, gd = fast.End(ctx)
			want, wd = walk.End(ctx)
		}
		if fmt.Sprint(gd) != fmt.Sprint(wd) || !bytes.Equal(bytes.Join(got, []byte("\n")), bytes.Join(want, []byte("\n"))) {
			t.Fatalf("event %d of %q:\n read %q (%v)\n walk %q (%v)", i, events, got, gd, want, wd)
		}
	}
	if fmt.Sprint(fast.Decisions()) != fmt.Sprint(walk.Decisions()) {
		t.Fatalf("%q: decisions %v, walked %v", events, fast.Decisions(), walk.Decisions())
	}
}

// TestReadChunk: the chunks of the common shape are read in one pass, the
// others walked.
func TestReadChunk(t *testing.T) {
	for _, tt := range []struct {
		data string
		want bool
	}{
		{`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}],"usage":null}`, true},
		{`{"choices":[{"index":3,"delta":{"role":"assistant"},"finish_reason":"stop"}]}`, true},
		{`{"choices":[{"index":0,"delta":{}}]}`, true},
		{`{"choices":[]}`, true},
		{`{"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":0}}}`, true},
		{`{"choices":[],"usage":{"prompt_tokens":1}`, false},
		{`{"choices":[ ]}`, false},
		{`{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}`, false},
		{`{"choices":[{"delta":{"content":"a"},"index":0}]}`, false},
		{`{"choices":[{"index":0,"delta":{"tool_calls":[]}}]}`, false},
		{`{"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"total_tokens":1}}`, true},
		{`{"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}],"choices":[]}`, true},
		{`{"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"total_tokens":1}`, false},
		{`{"choices":[{"index":0,"delta":{"content":"a"}}]} `, false},
		{`{"choices": [{"index":0,"delta":{"content":"a"}}]}`, false},
		{`{"cho\u0069ces":[{"index":0,"delta":{"content":"a"}}]}`, false},
		{`{"choices":[{"index":1.0,"delta":{"content":"a"}}]}`, false},
	} {
		var c chunk
		if got := readChunk([]byte(tt.data), &c, nil); got != tt.want {
			t.Errorf("readChunk(%s) = %v, want %v", tt.data, got, tt.want)
		}
		if !tt.want {
			continue
		}
		// Read again with its head known, and a chunk of that head but
		// another shape: the head changes nothing of what is read after it.
		head := []byte(tt.data[:c.head])
		var again chunk
		if !readChunk([]byte(tt.data), &again, head) || again != c {
			t.Errorf("readChunk(%s) with its head known: %+v, want %+v", tt.data, again, c)
		}
		other := string(head) + `"choices":[{"index":0,"delta":{"tool_calls":[]}}]}`
		if readChunk([]byte(other), &again, head) {
			t.Errorf("readChunk(%s) with its head known: read", other)
		}
		// Its shape: another string in the place of its one text reads as
		// readChunk reads it; more than a string does not.
		var sh chunkShape
		if sh.learn([]byte(tt.data), &c); c.n != 1 {
			continue
		}
		pre, post := tt.data[:c.texts[0].start], tt.data[c.texts[0].end:]
		for _, str := range []string{`"x"`, `""`, `"a\"b\\"`, `"mail bob@example.com"`} {
			data := []byte(pre + str + post)
			var byShape, read chunk
			if !sh.read(data, &byShape) || !readChunk(data, &read, nil) || byShape != read {
				t.Errorf("%s by its shape: %+v, read %+v", data, byShape, read)
			}
		}
		for _, str := range []string{`"a","refusal":"b"`, `"a\"`, `1`, `"a" `} {
			if data := []byte(pre + str + post); sh.read(data, &again) {
				t.Errorf("%s read by the shape of %s", data, tt.data)
			}
		}
	}
}

// TestChunkAsWalked: chat streams are released alike read in one pass
// and walked.
func TestChunkAsWalked(t *testing.T) {
	e := newEngine(t, Options{}, prefilterGuards...)
	for _, s := range chunkEvents {
		sameStream(t, e, strings.Split(s, "\n"))
	}
}

// FuzzChunk: a chat stream (one event a line) is released alike read in
// one pass and walked.
func FuzzChunk(f *testing.F) {
	for _, s := range chunkEvents {
		f.Add(s)
	}
	e := newEngine(f, Options{}, prefilterGuards...)
	f.Fuzz(func(t *testing.T, s string) {
		sameStream(t, e, strings.Split(s, "\n"))
	})
}

// TestNotPlain: the lowest byte notPlain marks is the first byte a plain
// key has not, for every byte at every place of a word otherwise plain,
// and behind every other.
func TestNotPlain(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\' }
	for pos := range 8 {
		for v := range 256 {
			for _, before := range []byte{'a', 0x00, '"', 0xff} {
				w := []byte("abcdefgh")
				for k := range pos {
					w[k] = before
				}
				w[pos] = byte(v)
				want := 8
				for k, c := range w {
					if !plain(c) {
						want = k
						break
					}
				}
				got := 8
				if m := notPlain(binary.LittleEndian.Uint64(w)); m != 0 {
					got = bits.TrailingZeros64(m) >> 3
				}
				if got != want {
					t.Fatalf("%q: first byte not plain at %d, want %d", w, got, want)
				}
			}
		}
	}
}
