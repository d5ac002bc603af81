package respcache

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/sse"
)

// collect feeds stream to a Collector of api in pieces of random sizes,
// as a client's writes come, and returns the answer.
func collect(t *testing.T, api API, stream []byte, u Usage, seed uint64) ([]byte, error) {
	t.Helper()
	c := NewCollector(api, 0)
	rng := rand.New(rand.NewPCG(seed, 7))
	for len(stream) > 0 {
		n := min(len(stream), 1+rng.IntN(64))
		if k, err := c.Write(stream[:n]); k != n || err != nil {
			t.Fatalf("Write = %d, %v", k, err)
		}
		stream = stream[n:]
	}
	return c.Answer(u)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sjsonDelete is body without its top-level member key.
func sjsonDelete(body []byte, key string) ([]byte, error) { return sjson.DeleteBytes(body, key) }

func readJSON(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(providers.CompactJSON(string(b)))
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

func glob(t *testing.T, patterns ...string) []string {
	t.Helper()
	var out []string
	for _, p := range patterns {
		m, err := filepath.Glob(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) < 5 {
		t.Fatalf("only %d files for %v", len(out), patterns)
	}
	return out
}

// A stored answer replayed as a stream (what a hit gives a streamed
// request) and collected back (what a miss stores of a streamed answer)
// is the stored answer: every translator's chat goldens, every Messages
// and Responses answer of the hubs' goldens.
func TestReplayCollectRoundTrip(t *testing.T) {
	cases := []struct {
		api   API
		files []string
	}{
		{Chat, glob(t, "../testdata/providers/*/response/*.unified.json", "../providers/testdata/replay/*.unified.json")},
		{Messages, glob(t, "../testdata/providers/messages/response/*.messages.json", "../providers/messages/testdata/replay/*.messages.json")},
		{Responses, glob(t, "../testdata/providers/responses/response/*.response.json", "../providers/responses/testdata/replay/*.json")},
	}
	for _, tc := range cases {
		for i, f := range tc.files {
			t.Run(string(tc.api)+"/"+filepath.Base(f), func(t *testing.T) {
				stored := readJSON(t, f)
				stream, err := Replay(nil, tc.api, stored, true)
				if err != nil {
					t.Fatal(err)
				}
				got, err := collect(t, tc.api, stream, Usage{}, uint64(i))
				if err != nil {
					t.Fatalf("%v\n%s", err, stream)
				}
				if tc.api == Chat {
					// The chunks of a stream carry no service_tier, and do
					// not tell empty content from none.
					stored, _ = sjsonDelete(stored, "service_tier")
					stored = bytes.ReplaceAll(stored, []byte(`"content":""`), []byte(`"content":null`))
				}
				if !sameJSON(t, got, stored) {
					t.Fatalf("collected\n%s\nstored\n%s", got, stored)
				}
				if !isAnswer(tc.api, got) {
					t.Fatalf("the collected answer is not an answer: %s", got)
				}
			})
		}
	}
}

// A chat stream without its usage chunk (the client did not ask for
// usage) is stored with the usage the host counted.
func TestCollectChatUsage(t *testing.T) {
	stored := readJSON(t, "../providers/testdata/replay/choices.unified.json")
	stream, err := Replay(nil, Chat, stored, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, Chat, stream, Usage{Prompt: 120, Completion: 30, Cached: 100, CacheWrite: 20, CacheWrite1h: 20, Reasoning: 5}, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150,"prompt_tokens_details":{"cached_tokens":100,"cache_write_tokens":20,"cache_write_1h_tokens":20},"completion_tokens_details":{"reasoning_tokens":5}}`
	if u := gjson.GetBytes(got, "usage").Raw; u != want {
		t.Fatalf("usage %s\nwant  %s", u, want)
	}
}

// transcript returns the parts of a stream transcript: what went in and
// what came out.
func transcript(t *testing.T, path string) (in, out []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	in, out, ok := bytes.Cut(b, []byte("\n----------\n"))
	if !ok {
		t.Fatalf("%s is not a transcript", path)
	}
	return in, out
}

// The chat streams the translators give (the goldens of their stream
// transcripts) collect into the answer the OpenAI SDK's accumulator reads
// in them; a stream that ends in an error event, or without [DONE], is
// never an answer.
func TestCollectChatStreams(t *testing.T) {
	var streams [][]byte
	var names []string
	for _, f := range glob(t, "../testdata/sse/anthropic/*.txt", "../testdata/sse/gemini/*.txt", "../testdata/sse/cohere/*.txt") {
		_, out := transcript(t, f)
		streams, names = append(streams, out), append(names, f)
	}
	for _, f := range glob(t, "../testdata/sse/messages/*.txt", "../testdata/sse/responses/*.txt", "../testdata/sse/bedrock/*.unified.txt") {
		var in []byte
		if strings.Contains(f, "bedrock") {
			in = readFile(t, f) // the unified stream alone
		} else {
			in, _ = transcript(t, f)
		}
		streams, names = append(streams, in), append(names, f) // hub chunks, as a provider gave them
	}
	completes, incompletes := 0, 0
	defer func() {
		if completes < 20 || incompletes < 5 {
			t.Errorf("%d complete and %d broken streams: the fixtures changed", completes, incompletes)
		}
	}()
	for i, stream := range streams {
		t.Run(strings.TrimPrefix(names[i], "../testdata/sse/"), func(t *testing.T) {
			acc, complete := accumulate(t, stream)
			got, err := collect(t, Chat, stream, Usage{Prompt: 1, Completion: 2}, uint64(i))
			if complete {
				completes++
			} else {
				incompletes++
			}
			if !complete {
				if !errors.Is(err, ErrIncomplete) {
					t.Fatalf("a stream that failed or was cut off collects into %s, %v", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, stream)
			}
			var cc openai.ChatCompletion
			if err := json.Unmarshal(got, &cc); err != nil {
				t.Fatalf("%v: %s", err, got)
			}
			if cc.ID != acc.ID || cc.Model != acc.Model || cc.Created != acc.Created || len(cc.Choices) != len(acc.Choices) {
				t.Fatalf("collected %s\naccumulated %+v", got, acc.ChatCompletion)
			}
			for k, want := range acc.Choices {
				c := cc.Choices[k]
				if c.Message.Content != want.Message.Content || c.Message.Refusal != want.Message.Refusal || c.FinishReason != want.FinishReason ||
					len(c.Message.ToolCalls) != len(want.Message.ToolCalls) || len(c.Logprobs.Content) != len(want.Logprobs.Content) {
					t.Fatalf("choice %d: collected %s\naccumulated %+v", k, got, want)
				}
				for j, tc := range want.Message.ToolCalls {
					if g := c.Message.ToolCalls[j]; g.ID != tc.ID || g.Function.Name != tc.Function.Name || g.Function.Arguments != tc.Function.Arguments {
						t.Fatalf("tool call %d: %+v, want %+v", j, g, tc)
					}
				}
			}
			if hasUsage := bytes.Contains(stream, []byte(`"choices":[],"usage":{`)); hasUsage && cc.Usage.PromptTokens != acc.Usage.PromptTokens ||
				hasUsage && cc.Usage.PromptTokensDetails.CachedTokens != acc.Usage.PromptTokensDetails.CachedTokens ||
				!hasUsage && (cc.Usage.PromptTokens != 1 || cc.Usage.CompletionTokens != 2) {
				t.Fatalf("usage %+v, accumulated %+v", cc.Usage, acc.Usage)
			}
		})
	}
}

// accumulate reads a unified stream with openai-go's accumulator; complete
// reports whether it ended with [DONE] and no error event.
func accumulate(t *testing.T, stream []byte) (acc openai.ChatCompletionAccumulator, complete bool) {
	t.Helper()
	for rest := stream; ; {
		ev, r, ok := sse.Cut(rest)
		if !ok {
			return acc, false
		}
		rest = r
		_, data := sse.Fields(ev)
		data = bytes.TrimSpace(data)
		switch {
		case len(data) == 0:
			continue
		case string(data) == "[DONE]":
			return acc, true
		case !json.Valid(data) || gjson.GetBytes(data, "error").Exists():
			return acc, false
		}
		var chunk openai.ChatCompletionChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		if !acc.AddChunk(chunk) {
			return acc, false
		}
	}
}

// The Messages streams of the hub's transcripts collect into the Message
// anthropic-sdk-go's accumulator reads in them; a stream that ends in an
// error event, or without message_stop, is never an answer.
func TestCollectMessagesStreams(t *testing.T) {
	for i, f := range glob(t, "../testdata/sse/messages/*.txt") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, stream := transcript(t, f)
			var acc anthropic.Message
			complete := false
			for rest := stream; ; {
				ev, r, ok := sse.Cut(rest)
				if !ok {
					break
				}
				rest = r
				name, data := sse.Fields(ev)
				if string(name) == "error" {
					break
				}
				if string(name) == "message_stop" {
					complete = true
				}
				var e anthropic.MessageStreamEventUnion
				if json.Unmarshal(data, &e) == nil {
					_ = acc.Accumulate(e)
				}
			}
			got, err := collect(t, Messages, stream, Usage{}, uint64(i))
			if !complete {
				if !errors.Is(err, ErrIncomplete) {
					t.Fatalf("a stream that failed collects into %s, %v", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var m anthropic.Message
			if err := json.Unmarshal(got, &m); err != nil {
				t.Fatal(err)
			}
			if m.ID != acc.ID || m.StopReason != acc.StopReason || len(m.Content) != len(acc.Content) ||
				m.Usage.InputTokens != acc.Usage.InputTokens || m.Usage.OutputTokens != acc.Usage.OutputTokens ||
				m.Usage.CacheReadInputTokens != acc.Usage.CacheReadInputTokens {
				t.Fatalf("collected %s\naccumulated %s", got, acc.RawJSON())
			}
			for k, b := range acc.Content {
				g := m.Content[k]
				if g.Type != b.Type || g.Text != b.Text || g.Thinking != b.Thinking || g.Signature != b.Signature || g.ID != b.ID ||
					(b.Type == "tool_use" && !sameJSON(t, g.Input, b.Input)) {
					t.Fatalf("block %d: collected %+v\naccumulated %+v", k, g, b)
				}
			}
		})
	}
}

// Failed and cut-off streams of every API are never answers; an answer
// above the limit is refused, whether it grows event by event or comes
// whole.
func TestCollectRefuses(t *testing.T) {
	chunk := func(s string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}]}` + "\n\n"
	}
	for _, tt := range []struct {
		name   string
		api    API
		stream string
		limit  int64
		want   error
	}{
		{"chat cut off", Chat, chunk("Hel"), 0, ErrIncomplete},
		{"chat error event", Chat, chunk("Hel") + `data: {"error":{"message":"overloaded","type":"server_error"}}` + "\n\n" + "data: [DONE]\n\n", 0, ErrIncomplete},
		{"chat not JSON", Chat, chunk("Hel") + "data: {oops\n\ndata: [DONE]\n\n", 0, ErrIncomplete},
		{"chat too large", Chat, chunk(strings.Repeat("x", 300)) + chunk(strings.Repeat("y", 300)) + "data: [DONE]\n\n", 500, ErrTooLarge},
		{"chat event too large", Chat, chunk(strings.Repeat("x", 600)), 500, ErrTooLarge},
		{"messages error", Messages, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"content\":[]}}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"x\"}}\n\n", 0, ErrIncomplete},
		{"messages without delta", Messages, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"content\":[]}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", 0, ErrIncomplete},
		{"messages cut off", Messages, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"content\":[]}}\n\n", 0, ErrIncomplete},
		{"responses failed", Responses, "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":2,\"response\":{\"id\":\"r\",\"status\":\"failed\"}}\n\n", 0, ErrIncomplete},
		{"responses cut off", Responses, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"r\"}}\n\n", 0, ErrIncomplete},
		{"embeddings do not stream", Embeddings, "data: [DONE]\n\n", 0, ErrIncomplete},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCollector(tt.api, tt.limit)
			if _, err := c.Write([]byte(tt.stream)); err != nil {
				t.Fatal(err)
			}
			if body, err := c.Answer(Usage{}); !errors.Is(err, tt.want) {
				t.Fatalf("Answer = %s, %v; want %v", body, err, tt.want)
			}
		})
	}
	// The cache's collector has its MaxEntrySize.
	c, _ := New(Config{MaxEntrySize: 100}, nil)
	col := c.Collector(Chat)
	if _, err := col.Write([]byte(chunk(strings.Repeat("z", 200)) + "data: [DONE]\n\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := col.Answer(Usage{}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("the cache's collector took an answer above max_entry_size: %v", err)
	}
}
