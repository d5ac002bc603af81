package cohere

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
)

const sseDir = "../../testdata/sse/cohere"

// testReplay replays streams through testChat's translator.
var testReplay = translatortest.Replay{New: testChat.ChatStream}

func TestStreamTranscripts(t *testing.T) {
	testReplay.Transcripts(t, sseDir)
}

// TestStreamMatchesAnswer checks, for every transcript that has a
// non-streamed twin in testdata/providers/cohere/response, that the
// translated stream, accumulated by openai-go's ChatCompletionAccumulator,
// says what the translated answer says: content, reasoning, every tool
// call's id, name and arguments, finish reason, usage and logprobs.
func TestStreamMatchesAnswer(t *testing.T) {
	pairs := 0
	for _, path := range translatortest.Transcripts(t, sseDir, ".txt") {
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		twin := filepath.Join(responseDir, strings.TrimSuffix(name, "_include_usage")+".cohere.json")
		body := translatortest.ReadOptional(t, twin)
		if body == nil {
			continue
		}
		pairs++
		t.Run(name, func(t *testing.T) {
			answer, _, err := testChat.ChatResponse(body)
			if err != nil {
				t.Fatal(err)
			}
			upstream, _, opts := translatortest.ReadTranscript(t, path)
			out, err := testReplay.Translate(opts, upstream, nil)
			if err != nil {
				t.Fatal(err)
			}
			providerkit.StreamMatchesAnswer(t, out, answer, opts)
		})
	}
	if pairs < 6 {
		t.Fatalf("only %d transcripts have a non-streamed twin", pairs)
	}
}

func TestStreamMalformedEvent(t *testing.T) {
	testReplay.Refuses(t,
		"event: message-start\ndata: {\"type\":\"message-start\",",
		"data: 42",
		"data: [1,2]",
	)
}

func TestStreamEmptyEvents(t *testing.T) {
	testReplay.Ignores(t, "", ": comment", "event: debug", "id: 7\nretry: 100", "data: [DONE]",
		"event: something-new\ndata: {\"x\":1}", "data: {\"type\":\"content-end\",\"index\":0}")
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
	out, err := testReplay.Translate(providers.StreamOptions{}, []byte(upstream), nil)
	if err != nil {
		t.Fatal(err)
	}
	providerkit.CheckUnifiedStream(t, out, providers.StreamOptions{})
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
	out, err := testReplay.Translate(providers.StreamOptions{}, []byte(upstream), nil)
	if err != nil {
		t.Fatal(err)
	}
	acc := providerkit.Accumulate(t, out)
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
			providerkit.CheckUnifiedStream(t, out, providers.StreamOptions{IncludeUsage: true})
			events := bytes.Split(bytes.TrimSuffix(out, []byte("\n\n")), []byte("\n\n"))
			last := gjson.ParseBytes(bytes.TrimPrefix(events[len(events)-1], []byte("data: ")))
			if last.Get("error.type").Str != tt.wantType || last.Get("error.code").Str != tt.code ||
				!strings.Contains(last.Get("error.message").Str, tt.messageSubstring) || bytes.Contains(out, []byte("[DONE]")) {
				t.Errorf("got:\n%s", out)
			}
		})
	}
}
