package anthropic

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// answer is what a client makes of a chat completion: the fields the
// stream/non-stream equivalence compares.
type answer struct {
	Content, Reasoning string
	ThinkingBlocks     []any
	ToolCalls          []toolCall
	FinishReason       string
	Usage              usageCounts
}

type toolCall struct {
	ID, Name  string
	Arguments any // decoded, so that JSON layout does not count
}

type usageCounts struct {
	Prompt, Completion, Total, Cached, Reasoning int64
}

// TestStreamMatchesAnswer translates each transcript that has an answer of
// the same name in testdata/providers/anthropic/response (the same message,
// streamed and not), accumulates the unified stream with openai-go's
// ChatCompletionAccumulator (plus reasoning_content and thinking_blocks,
// which the SDK does not know), and checks that it equals the translated
// answer: content, reasoning, every tool call's id, name and arguments,
// the finish reason and the usage.
func TestStreamMatchesAnswer(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(sseDir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	pairs := 0
	for _, path := range files {
		name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".txt"), "_include_usage")
		body, err := os.ReadFile(filepath.Join(responseDir, name+".anthropic.json"))
		if os.IsNotExist(err) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		pairs++
		t.Run(name, func(t *testing.T) {
			upstream, _, _ := readTranscript(t, path)
			out, err := translate(testChat, providers.StreamOptions{IncludeUsage: true}, upstream, nil)
			if err != nil {
				t.Fatal(err)
			}
			streamed := accumulate(t, out)

			unified, err := testChat.ChatResponse(body)
			if err != nil {
				t.Fatal(err)
			}
			var cc openai.ChatCompletion
			if err := json.Unmarshal(unified, &cc); err != nil {
				t.Fatal(err)
			}
			whole := answerOf(t, cc, gjson.GetBytes(unified, "choices.0.message"))

			if !reflect.DeepEqual(streamed, whole) {
				t.Errorf("the stream and the answer differ\nstreamed: %+v\nanswer:   %+v", streamed, whole)
			}
		})
	}
	if pairs < 5 {
		t.Fatalf("only %d transcripts have an answer to compare with", pairs)
	}
}

// accumulate feeds a unified stream's chunks to openai-go's accumulator.
func accumulate(t *testing.T, out []byte) answer {
	t.Helper()
	var acc openai.ChatCompletionAccumulator
	var reasoning strings.Builder
	var blocks []any
	for _, ev := range bytes.SplitAfter(out, []byte("\n\n")) {
		data, ok := bytes.CutPrefix(bytes.TrimSuffix(ev, []byte("\n\n")), []byte("data: "))
		if !ok || string(data) == "[DONE]" {
			continue
		}
		var chunk openai.ChatCompletionChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		if !acc.AddChunk(chunk) {
			t.Fatalf("the accumulator refused %s", data)
		}
		delta := gjson.GetBytes(data, "choices.0.delta")
		reasoning.WriteString(delta.Get("reasoning_content").Str)
		for _, b := range delta.Get("thinking_blocks").Array() {
			blocks = append(blocks, decode(t, b.Raw))
		}
	}
	a := answerOf(t, acc.ChatCompletion, gjson.Result{})
	a.Reasoning, a.ThinkingBlocks = reasoning.String(), blocks
	return a
}

// answerOf reads an answer from a chat completion; message, when it
// exists, is its raw message, for reasoning_content and thinking_blocks.
func answerOf(t *testing.T, cc openai.ChatCompletion, message gjson.Result) answer {
	t.Helper()
	if len(cc.Choices) != 1 {
		t.Fatalf("%d choices, want 1", len(cc.Choices))
	}
	c := cc.Choices[0]
	a := answer{
		Content:      c.Message.Content,
		FinishReason: c.FinishReason,
		Usage: usageCounts{cc.Usage.PromptTokens, cc.Usage.CompletionTokens, cc.Usage.TotalTokens,
			cc.Usage.PromptTokensDetails.CachedTokens, cc.Usage.CompletionTokensDetails.ReasoningTokens},
	}
	for _, tc := range c.Message.ToolCalls {
		a.ToolCalls = append(a.ToolCalls, toolCall{tc.ID, tc.Function.Name, decode(t, tc.Function.Arguments)})
	}
	if message.Exists() {
		a.Reasoning = message.Get("reasoning_content").Str
		for _, b := range message.Get("thinking_blocks").Array() {
			a.ThinkingBlocks = append(a.ThinkingBlocks, decode(t, b.Raw))
		}
	}
	return a
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %q: %v", s, err)
	}
	return v
}
