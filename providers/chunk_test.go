package providers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/providers/jsonw"
)

// TestChunks checks every chunk Chunks writes, byte for byte, with and
// without usage.
func TestChunks(t *testing.T) {
	head := Head{ID: jsonw.Lit(`"c\u00e91"`), Created: 1, Model: jsonw.Plain("m\"")}
	const start = `data: {"id":"c\u00e91","object":"chat.completion.chunk","created":1,"model":"m\"","choices":[{"index":`
	const lp = `{"content":[],"refusal":null}`
	for _, tc := range []struct {
		name  string
		write func(c *Chunks, dst []byte) []byte
		want  string // after start, up to the end of the choice
	}{
		{"role", func(c *Chunks, dst []byte) []byte { return c.Role(dst, 0) },
			`0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`},
		{"refusal", func(c *Chunks, dst []byte) []byte { return c.Refusal(dst, 2, "no\n") },
			`2,"delta":{"role":"assistant","content":null,"refusal":"no\n"},"logprobs":null,"finish_reason":"content_filter"}]`},
		{"content", func(c *Chunks, dst []byte) []byte { return c.Content(dst, 0, jsonw.Lit(`"hi\u0021"`)) },
			`0,"delta":{"content":"hi\u0021"},"logprobs":null,"finish_reason":null}]`},
		{"content with logprobs", func(c *Chunks, dst []byte) []byte { return c.ContentLogprobs(dst, 0, jsonw.Plain("a"), lp) },
			`0,"delta":{"content":"a"},"logprobs":{"content":[],"refusal":null},"finish_reason":null}]`},
		{"reasoning", func(c *Chunks, dst []byte) []byte { return c.Reasoning(dst, 1, jsonw.Plain("hm")) },
			`1,"delta":{"reasoning_content":"hm"},"logprobs":null,"finish_reason":null}]`},
		{"tool call start", func(c *Chunks, dst []byte) []byte {
			return c.ToolCallStart(dst, 0, 3, jsonw.Plain("call_1"), jsonw.Lit(`"get"`))
		}, `0,"delta":{"tool_calls":[{"index":3,"id":"call_1","type":"function","function":{"name":"get","arguments":""}}]},"logprobs":null,"finish_reason":null}]`},
		{"tool call arguments", func(c *Chunks, dst []byte) []byte {
			return c.ToolCallArguments(dst, 0, 3, jsonw.Lit(`"{\"a\":"`))
		}, `0,"delta":{"tool_calls":[{"index":3,"function":{"arguments":"{\"a\":"}}]},"logprobs":null,"finish_reason":null}]`},
		{"thinking block", func(c *Chunks, dst []byte) []byte {
			return c.ThinkingBlock(dst, 0, jsonw.Plain("t"), jsonw.Lit(`"sig"`))
		}, `0,"delta":{"thinking_blocks":[{"type":"thinking","thinking":"t","signature":"sig"}]},"logprobs":null,"finish_reason":null}]`},
		{"redacted thinking", func(c *Chunks, dst []byte) []byte { return c.RedactedThinking(dst, 0, jsonw.Plain("d")) },
			`0,"delta":{"thinking_blocks":[{"type":"redacted_thinking","data":"d"}]},"logprobs":null,"finish_reason":null}]`},
		{"logprobs", func(c *Chunks, dst []byte) []byte { return c.Logprobs(dst, 0, lp) },
			`0,"delta":{},"logprobs":{"content":[],"refusal":null},"finish_reason":null}]`},
		{"finish", func(c *Chunks, dst []byte) []byte { return c.Finish(dst, 0, "stop") },
			`0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`},
	} {
		for _, includeUsage := range []bool{false, true} {
			var c Chunks
			c.Start(head, includeUsage)
			got := string(tc.write(&c, []byte("x")))
			want := "x" + start + tc.want
			if includeUsage {
				want += `,"usage":null`
			}
			want += "}\n\n"
			if got != want {
				t.Errorf("%s (usage %v):\ngot  %q\nwant %q", tc.name, includeUsage, got, want)
			}
			checkEvents(t, got[1:])
		}
	}
}

func TestChunksEnd(t *testing.T) {
	var c Chunks
	c.Start(Head{ID: jsonw.Plain("c"), Created: 1, Model: jsonw.Plain("m")}, true)
	got := string(c.End([]byte("x"), Usage{Prompt: 1, Completion: 2, Total: 3}))
	want := `xdata: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}` + "\n\ndata: [DONE]\n\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	c.Start(Head{ID: jsonw.Plain("c"), Created: 1, Model: jsonw.Plain("m")}, false)
	if got := string(c.End([]byte("x"), Usage{})); got != "xdata: [DONE]\n\n" {
		t.Errorf("without usage: %q", got)
	}
}

func TestChunksErrors(t *testing.T) {
	var c Chunks // no Start: error events need none
	got := string(c.Incomplete([]byte("x")))
	want := `xdata: {"error":{"message":"the provider's stream ended before the answer was complete","type":"server_error","param":null,"code":"stream_incomplete"}}` + "\n\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	got = string(c.Error(nil, &Error{Type: "t", Code: "c", Param: "p", Message: "m"}))
	if want := `data: {"error":{"message":"m","type":"t","param":"p","code":"c"}}` + "\n\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestInternalErrorEvent checks the constant that stands in for an event
// the writer reported a misuse in, and that endEvent uses it.
func TestInternalErrorEvent(t *testing.T) {
	if got := string(AppendErrorEvent(nil, internalError())); got != internalErrorEvent {
		t.Errorf("internalErrorEvent = %q, want %q", internalErrorEvent, got)
	}
	w := jsonw.New([]byte("x"))
	w.Object() // left open: a misuse
	if got := string(endEvent(&w, []byte("x")[:1])); got != "x"+internalErrorEvent {
		t.Errorf("endEvent after a misuse = %q", got)
	}
}

// TestChunksNoAllocs checks that the chunks of a stream, once its head is
// written, allocate nothing in a buffer with room.
func TestChunksNoAllocs(t *testing.T) {
	var c Chunks
	c.Start(Head{ID: jsonw.Plain("chatcmpl-1"), Created: 1, Model: jsonw.Plain("m")}, true)
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		b := c.Role(buf[:0], 0)
		b = c.Content(b, 0, jsonw.Lit(`"x"`))
		b = c.ToolCallStart(b, 0, 0, jsonw.Plain("id"), jsonw.Plain("f"))
		b = c.ToolCallArguments(b, 0, 0, jsonw.Lit(`"{}"`))
		b = c.Finish(b, 0, "stop")
		_ = c.End(b, Usage{})
	})
	if allocs != 0 {
		t.Errorf("%v allocations", allocs)
	}
}

func TestCompletion(t *testing.T) {
	w := jsonw.New([]byte("x"))
	c := StartCompletion(&w, Head{ID: jsonw.Plain("id").Prefixed("chatcmpl-"), Created: 2, Model: jsonw.Lit(`"m"`)})
	m := c.Choice(0)
	var j TextJoin
	m.JoinedContent(&j)
	m.NullRefusal()
	m.Reasoning(jsonw.Plain("r"))
	tb := m.ThinkingBlocks()
	WriteThinkingBlock(tb, jsonw.Plain(""), jsonw.Plain("s"))
	WriteRedactedThinking(tb, jsonw.Plain("d"))
	tb.End()
	calls := m.ToolCalls()
	calls.Call(jsonw.Plain("call_1"), jsonw.Plain("f"), jsonw.Plain("{}"))
	calls.End()
	m.End("tool_calls")
	m = c.ChoiceRaw("1")
	m.Content(jsonw.Plain("hi"))
	m.Refusal(jsonw.Plain("no"))
	m.Logprobs().Raw(`{"content":[]}`)
	m.Finish("stop")
	c.Usage(Usage{Prompt: 1, Completion: 1, Total: 2})
	c.ServiceTier("flex")
	got, err := c.Finish()
	if err != nil {
		t.Fatal(err)
	}
	want := `x{"id":"chatcmpl-id","object":"chat.completion","created":2,"model":"m","choices":[` +
		`{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"reasoning_content":"r",` +
		`"thinking_blocks":[{"type":"thinking","thinking":"","signature":"s"},{"type":"redacted_thinking","data":"d"}],` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"},` +
		`{"index":1,"message":{"role":"assistant","content":"hi","refusal":"no"},"logprobs":{"content":[]},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2},"service_tier":"flex"}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestErrorJSONShape(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{Type: "invalid_request_error", Message: "bad \"x\""},
			`{"error":{"message":"bad \"x\"","type":"invalid_request_error","param":null,"code":null}}`},
		{Error{Type: "t", Code: "c", Param: "p", Message: ""},
			`{"error":{"message":"","type":"t","param":"p","code":"c"}}`},
	} {
		if got := string(tc.e.JSON()); got != tc.want {
			t.Errorf("got %s, want %s", got, tc.want)
		}
	}
}

// checkEvents checks that out is whole events, each a data line of valid
// JSON or [DONE].
func checkEvents(t *testing.T, out string) {
	t.Helper()
	for _, ev := range strings.SplitAfter(out, "\n\n") {
		if ev == "" {
			continue
		}
		data, ok := strings.CutPrefix(ev, "data: ")
		data, ok2 := strings.CutSuffix(data, "\n\n")
		if !ok || !ok2 || (data != "[DONE]" && !json.Valid([]byte(data))) {
			t.Errorf("malformed event %q", ev)
		}
	}
}

// TestChunksFastPath checks that a chunk of choice 0, written as the
// recorded head and tail around its delta, is the chunk the writer writes
// whole for another choice.
func TestChunksFastPath(t *testing.T) {
	for _, includeUsage := range []bool{false, true} {
		var c Chunks
		c.Start(Head{ID: jsonw.Plain("chatcmpl-1"), Created: 5, Model: jsonw.Lit(`"m\u0041"`)}, includeUsage)
		for name, write := range map[string]func(dst []byte, choice int) []byte{
			"role":      func(dst []byte, i int) []byte { return c.Role(dst, i) },
			"content":   func(dst []byte, i int) []byte { return c.Content(dst, i, jsonw.Plain("x")) },
			"reasoning": func(dst []byte, i int) []byte { return c.Reasoning(dst, i, jsonw.Plain("r")) },
			"tool call start": func(dst []byte, i int) []byte {
				return c.ToolCallStart(dst, i, 1, jsonw.Plain("id"), jsonw.Plain("f"))
			},
			"tool call arguments": func(dst []byte, i int) []byte { return c.ToolCallArguments(dst, i, 1, jsonw.Plain("{")) },
			"thinking block":      func(dst []byte, i int) []byte { return c.ThinkingBlock(dst, i, jsonw.Plain("t"), jsonw.Plain("s")) },
			"redacted thinking":   func(dst []byte, i int) []byte { return c.RedactedThinking(dst, i, jsonw.Plain("d")) },
		} {
			fast := strings.Replace(string(write([]byte("x"), 0)), `"index":0,"delta"`, `"index":7,"delta"`, 1)
			if whole := string(write([]byte("x"), 7)); fast != whole {
				t.Errorf("%s (usage %v):\nfast  %s\nwhole %s", name, includeUsage, fast, whole)
			}
			checkEvents(t, fast[1:])
		}
	}
}
