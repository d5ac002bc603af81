package cohere

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/sse"
)

const sseDir = "../../testdata/sse/cohere"

// separator divides a transcript's upstream stream from the expected
// unified stream.
const separator = "----------"

// readTranscript splits testdata/sse/cohere/<name>.txt. Transcripts whose
// name contains "include_usage" are translated with IncludeUsage.
func readTranscript(t testing.TB, path string) (upstream, want []byte, opts providers.StreamOptions) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var i int
	if bytes.HasPrefix(data, []byte(separator+"\n")) {
		i = -1
	} else if i = bytes.Index(data, []byte("\n"+separator+"\n")); i < 0 {
		t.Fatalf("%s: no %q line", path, separator)
	}
	upstream, want = data[:i+1], data[i+len(separator)+2:]
	opts.IncludeUsage = strings.Contains(filepath.Base(path), "include_usage")
	return upstream, want, opts
}

// transcripts lists the stream transcripts.
func transcripts(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(sseDir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in %s (%v)", sseDir, err)
	}
	return files
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
	for _, path := range transcripts(t) {
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
			checkUnifiedStream(t, got, opts.IncludeUsage)
			if !bytes.Equal(got, want) {
				t.Fatalf("unified stream differs\ngot:\n%s\nwant:\n%s", got, want)
			}

			// Framing must not matter: random chunk sizes, and every
			// line-ending style SSE allows.
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

// TestStreamMatchesAnswer checks, for every transcript that has a
// non-streamed twin in testdata/providers/cohere/response, that the
// translated stream, accumulated by openai-go's ChatCompletionAccumulator,
// says what the translated answer says: content, reasoning, every tool
// call's id, name and arguments, finish reason, usage and logprobs.
func TestStreamMatchesAnswer(t *testing.T) {
	pairs := 0
	for _, path := range transcripts(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		twin := filepath.Join(responseDir, strings.TrimSuffix(name, "_include_usage")+".cohere.json")
		body, err := os.ReadFile(twin)
		if os.IsNotExist(err) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		pairs++
		t.Run(name, func(t *testing.T) {
			answer, err := testChat.ChatResponse(body)
			if err != nil {
				t.Fatal(err)
			}
			var want openai.ChatCompletion
			if err := json.Unmarshal(answer, &want); err != nil {
				t.Fatal(err)
			}

			upstream, _, opts := readTranscript(t, path)
			out, err := translate(testChat, opts, upstream, nil)
			if err != nil {
				t.Fatal(err)
			}
			acc, reasoning := accumulate(t, out)
			got := acc.ChatCompletion

			if len(got.Choices) != 1 {
				t.Fatalf("accumulated %d choices", len(got.Choices))
			}
			g, w := got.Choices[0], want.Choices[0]
			if got.ID != want.ID || g.Message.Content != w.Message.Content || g.FinishReason != w.FinishReason {
				t.Errorf("accumulated id %q content %q finish %q\nanswer id %q content %q finish %q",
					got.ID, g.Message.Content, g.FinishReason, want.ID, w.Message.Content, w.FinishReason)
			}
			if wantReasoning := gjson.GetBytes(answer, "choices.0.message.reasoning_content").Str; reasoning != wantReasoning {
				t.Errorf("streamed reasoning %q, answer's %q", reasoning, wantReasoning)
			}
			if len(g.Message.ToolCalls) != len(w.Message.ToolCalls) {
				t.Fatalf("accumulated %d tool calls, answer has %d", len(g.Message.ToolCalls), len(w.Message.ToolCalls))
			}
			for i, call := range w.Message.ToolCalls {
				gc := g.Message.ToolCalls[i]
				if gc.ID != call.ID || gc.Type != call.Type || gc.Function.Name != call.Function.Name ||
					gc.Function.Arguments != call.Function.Arguments {
					t.Errorf("tool call %d: accumulated %+v, answer %+v", i, gc, call)
				}
			}
			if opts.IncludeUsage {
				if got.Usage.PromptTokens != want.Usage.PromptTokens || got.Usage.CompletionTokens != want.Usage.CompletionTokens ||
					got.Usage.TotalTokens != want.Usage.TotalTokens ||
					got.Usage.PromptTokensDetails.CachedTokens != want.Usage.PromptTokensDetails.CachedTokens {
					t.Errorf("accumulated usage %+v, answer %+v", got.Usage, want.Usage)
				}
			} else if got.Usage.TotalTokens != 0 {
				t.Errorf("usage without include_usage: %+v", got.Usage)
			}
			if len(g.Logprobs.Content) != len(w.Logprobs.Content) {
				t.Fatalf("accumulated %d logprobs, answer has %d", len(g.Logprobs.Content), len(w.Logprobs.Content))
			}
			for i, lp := range w.Logprobs.Content {
				if gl := g.Logprobs.Content[i]; gl.Token != lp.Token || gl.Logprob != lp.Logprob {
					t.Errorf("logprob %d: accumulated %+v, answer %+v", i, gl, lp)
				}
			}
		})
	}
	if pairs < 6 {
		t.Fatalf("only %d transcripts have a non-streamed twin", pairs)
	}
}

// accumulate feeds a unified stream's chunks to openai-go's accumulator, as
// the SDK's stream reader would, and returns it with the concatenated
// reasoning_content deltas (a field the SDK does not know).
func accumulate(t *testing.T, out []byte) (*openai.ChatCompletionAccumulator, string) {
	t.Helper()
	var acc openai.ChatCompletionAccumulator
	var reasoning strings.Builder
	for _, ev := range bytes.SplitAfter(out, []byte("\n\n")) {
		data := bytes.TrimSuffix(bytes.TrimPrefix(ev, []byte("data: ")), []byte("\n\n"))
		if len(data) == 0 || string(data) == "[DONE]" {
			continue
		}
		if bytes.HasPrefix(data, []byte(`{"error":`)) {
			t.Fatalf("the stream failed: %s", data)
		}
		var chunk openai.ChatCompletionChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		if !acc.AddChunk(chunk) {
			t.Fatalf("the accumulator refused %s", data)
		}
		reasoning.WriteString(gjson.GetBytes(data, "choices.0.delta.reasoning_content").Str)
	}
	return &acc, reasoning.String()
}

// checkUnifiedStream checks that out is a sequence of well-formed unified
// events: single data lines, each a JSON object or [DONE], with [DONE] or
// an error last, chunks sharing id and created, usage null in every chunk
// but the last with include_usage and absent without.
func checkUnifiedStream(t testing.TB, out []byte, includeUsage bool) {
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
		chunk := gjson.ParseBytes(data)
		if chunk.Get("error").Exists() {
			continue
		}
		if id == "" {
			id, created = chunk.Get("id").Raw, chunk.Get("created").Raw
		} else if chunk.Get("id").Raw != id || chunk.Get("created").Raw != created {
			t.Errorf("chunks disagree on id or created: %s", data)
		}
		u := chunk.Get("usage")
		switch {
		case !includeUsage && u.Exists():
			t.Errorf("usage without include_usage: %s", data)
		case includeUsage && !u.Exists():
			t.Errorf("chunk without usage: %s", data)
		case includeUsage && u.Type != gjson.Null && chunk.Get("choices.#").Int() != 0:
			t.Errorf("usage in a chunk with choices: %s", data)
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
			return "malformed event " + quote(ev)
		}
		data := ev[len("data: ") : len(ev)-2]
		if bytes.ContainsAny(data, "\r\n") {
			return "event spans lines: " + quote(ev)
		}
		last := i == len(events)-1
		switch {
		case string(data) == "[DONE]":
			if !last {
				return "events follow [DONE]"
			}
		case !json.Valid(data):
			return "invalid JSON: " + quote(ev)
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

func quote(b []byte) string {
	q, _ := json.Marshal(string(b))
	return string(q)
}

func TestStreamMalformedEvent(t *testing.T) {
	for _, ev := range []string{
		"event: message-start\ndata: {\"type\":\"message-start\",",
		"data: 42",
		"data: [1,2]",
	} {
		tr := testChat.ChatStream(providers.StreamOptions{})
		if out, err := tr.Event(nil, []byte(ev)); err == nil {
			t.Errorf("Event(%q) = %q, want an error", ev, out)
		}
	}
}

func TestStreamEmptyEvents(t *testing.T) {
	tr := testChat.ChatStream(providers.StreamOptions{})
	for _, ev := range []string{"", ": comment", "event: debug", "id: 7\nretry: 100", "data: [DONE]",
		"event: something-new\ndata: {\"x\":1}", "data: {\"type\":\"content-end\",\"index\":0}"} {
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

// TestStreamNoMessageStart checks that content arriving without a
// message-start still makes well-formed chunks, and that tool call deltas
// without an index go to the call that started last.
func TestStreamNoMessageStart(t *testing.T) {
	upstream := "data: {\"type\":\"content-delta\",\"delta\":{\"message\":{\"content\":{\"text\":\"hi\"}}}}\n\n" +
		"data: {\"type\":\"tool-call-delta\",\"delta\":{\"message\":{\"tool_calls\":{\"function\":{\"arguments\":\"{}\"}}}}}\n\n" +
		"data: {\"type\":\"tool-call-start\",\"delta\":{\"message\":{\"tool_calls\":{\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"f\"}}}}}\n\n" +
		"data: {\"type\":\"tool-call-start\",\"delta\":{\"message\":{\"tool_calls\":{\"id\":\"b\",\"type\":\"function\",\"function\":{\"name\":\"g\"}}}}}\n\n" +
		"data: {\"type\":\"tool-call-delta\",\"delta\":{\"message\":{\"tool_calls\":{\"function\":{\"arguments\":\"{}\"}}}}}\n\n" +
		"data: {\"type\":\"message-end\",\"delta\":{\"finish_reason\":\"TOOL_CALL\"}}\n\n"
	out, err := translate(testChat, providers.StreamOptions{}, []byte(upstream), nil)
	if err != nil {
		t.Fatal(err)
	}
	checkUnifiedStream(t, out, false)
	head := `data: {"id":"","object":"chat.completion.chunk","created":1750000000,"model":"","choices":[{"index":0,"delta":`
	want := head + `{"content":"hi"},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		head + `{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":""}}]},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		head + `{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":""}}]},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		head + `{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
		head + `{},"logprobs":null,"finish_reason":"tool_calls"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

// TestStreamGeneratedCallID checks that a tool call started without an id
// gets one in OpenAI's form.
func TestStreamGeneratedCallID(t *testing.T) {
	tr := testChat.ChatStream(providers.StreamOptions{})
	out, err := tr.Event(nil, []byte(`data: {"type":"tool-call-start","index":0,"delta":{"message":{"tool_calls":{"type":"function","function":{"name":"f","arguments":""}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	id := gjson.GetBytes(bytes.TrimPrefix(out, []byte("data: ")), "choices.0.delta.tool_calls.0.id").Str
	if len(id) != len("call_")+24 || !strings.HasPrefix(id, "call_") || strings.Trim(id[5:], base62) != "" {
		t.Errorf("generated id %q, want call_ and 24 base62 characters", id)
	}
}

// TestStreamIndexedDeltas checks that tool call deltas follow Cohere's
// index, even when the calls' deltas interleave.
func TestStreamIndexedDeltas(t *testing.T) {
	start := func(i int, id string) string {
		return `data: {"type":"tool-call-start","index":` + string(rune('0'+i)) + `,"delta":{"message":{"tool_calls":{"id":"` + id + `","type":"function","function":{"name":"f","arguments":""}}}}}` + "\n\n"
	}
	arg := func(i int, s string) string {
		return `data: {"type":"tool-call-delta","index":` + string(rune('0'+i)) + `,"delta":{"message":{"tool_calls":{"function":{"arguments":"` + s + `"}}}}}` + "\n\n"
	}
	upstream := start(3, "x") + start(7, "y") + arg(3, "{") + arg(7, "[") + arg(3, "}") + arg(7, "]") +
		`data: {"type":"message-end","delta":{"finish_reason":"TOOL_CALL"}}` + "\n\n"
	out, err := translate(testChat, providers.StreamOptions{}, []byte(upstream), nil)
	if err != nil {
		t.Fatal(err)
	}
	acc, _ := accumulate(t, out)
	calls := acc.Choices[0].Message.ToolCalls
	if len(calls) != 2 || calls[0].ID != "x" || calls[0].Function.Arguments != "{}" ||
		calls[1].ID != "y" || calls[1].Function.Arguments != "[]" {
		t.Errorf("accumulated %+v", calls)
	}
}

// TestStreamErrors checks that a stream Cohere ends with ERROR or TIMEOUT,
// or with an error object, ends with an error event the SDKs raise, and
// never with [DONE].
func TestStreamErrors(t *testing.T) {
	tests := []struct {
		name, event      string
		wantType, code   string
		messageSubstring string
	}{
		{"ERROR", `{"type":"message-end","delta":{"finish_reason":"ERROR","error":"model crashed"}}`,
			"server_error", "generation_error", "model crashed"},
		{"TIMEOUT", `{"type":"message-end","delta":{"finish_reason":"TIMEOUT"}}`,
			"server_error", "timeout", "timed out"},
		{"error with COMPLETE", `{"type":"message-end","delta":{"finish_reason":"COMPLETE","error":"late failure"}}`,
			"server_error", "generation_error", "late failure"},
		{"error without reason", `{"type":"message-end","delta":{"error":"no reason"}}`,
			"server_error", "generation_error", "no reason"},
		{"error object", `{"message":"internal server error"}`,
			"server_error", "provider_error", "internal server error"},
		{"error event", `{"type":"error","error":{"message":"overloaded"}}`,
			"server_error", "provider_error", "overloaded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := testChat.ChatStream(providers.StreamOptions{IncludeUsage: true})
			out, err := tr.Event(nil, []byte(`data: {"id":"m","type":"message-start"}`))
			if err != nil {
				t.Fatal(err)
			}
			if out, err = tr.Event(out, []byte("data: "+tt.event)); err != nil {
				t.Fatal(err)
			}
			out, _ = tr.Event(out, []byte("data: [DONE]"))
			out = tr.Close(out)
			checkUnifiedStream(t, out, true)
			events := bytes.Split(bytes.TrimSuffix(out, []byte("\n\n")), []byte("\n\n"))
			last := gjson.ParseBytes(bytes.TrimPrefix(events[len(events)-1], []byte("data: ")))
			if last.Get("error.type").Str != tt.wantType || last.Get("error.code").Str != tt.code ||
				!strings.Contains(last.Get("error.message").Str, tt.messageSubstring) || bytes.Contains(out, []byte("[DONE]")) {
				t.Errorf("got:\n%s", out)
			}
		})
	}
}
