package providerkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// Accumulated is a unified stream as a client reads it: openai-go's
// ChatCompletionAccumulator fed every chunk, and what the SDK does not
// keep, per choice index: the reasoning_content deltas joined and the
// thinking_blocks entries as they came (raw JSON).
type Accumulated struct {
	openai.ChatCompletionAccumulator
	Reasoning      map[int64]string
	ThinkingBlocks map[int64][]string
	Done           bool // the stream ended with data: [DONE]
}

// Accumulate reads the unified stream out as the OpenAI SDK's stream
// reader does. It fails on an error event, a chunk the SDK cannot decode
// and a chunk the accumulator refuses.
func Accumulate(t testing.TB, out []byte) *Accumulated {
	t.Helper()
	a := &Accumulated{Reasoning: map[int64]string{}, ThinkingBlocks: map[int64][]string{}}
	for _, data := range Data(out) {
		if string(data) == "[DONE]" {
			a.Done = true
			break
		}
		if bytes.HasPrefix(data, []byte(`{"error":`)) {
			t.Fatalf("the stream failed: %s", data)
		}
		var chunk openai.ChatCompletionChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		if !a.AddChunk(chunk) {
			t.Fatalf("the accumulator refused %s", data)
		}
		gjson.GetBytes(data, "choices").ForEach(func(_, ch gjson.Result) bool {
			i := ch.Get("index").Int()
			a.Reasoning[i] += ch.Get("delta.reasoning_content").Str
			ch.Get("delta.thinking_blocks").ForEach(func(_, b gjson.Result) bool {
				a.ThinkingBlocks[i] = append(a.ThinkingBlocks[i], b.Raw)
				return true
			})
			return true
		})
	}
	return a
}

// Answer is what a client reads in a chat completion, streamed or not:
// the fields the stream/non-stream equivalence compares.
type Answer struct {
	ID, Model string
	Created   int64
	Choices   []Choice
	Usage     Usage
}

// Choice is one choice of an Answer.
type Choice struct {
	Index                       int64
	Content, Refusal, Reasoning string
	ThinkingBlocks              []string // raw JSON
	ToolCalls                   []ToolCall
	FinishReason                string
	Logprobs                    []Logprob
}

// ToolCall is one tool call of a Choice.
type ToolCall struct {
	ID, Type, Name, Arguments string
}

// Logprob is one token's log probability in a Choice.
type Logprob struct {
	Token       string
	Logprob     float64
	Bytes       []int64
	TopLogprobs int
}

// Usage is an Answer's token counts.
type Usage struct {
	Prompt, Completion, Total, Cached, Reasoning int64
}

// Answer returns what the stream said.
func (a *Accumulated) Answer() Answer {
	ans := answerOf(a.ChatCompletion)
	for i := range ans.Choices {
		c := &ans.Choices[i]
		c.Reasoning, c.ThinkingBlocks = a.Reasoning[c.Index], a.ThinkingBlocks[c.Index]
	}
	return ans
}

// AnswerOf reads a unified chat.completion body as a client does.
func AnswerOf(t testing.TB, body []byte) Answer {
	t.Helper()
	var cc openai.ChatCompletion
	if err := json.Unmarshal(body, &cc); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	ans := answerOf(cc)
	for i, ch := range gjson.GetBytes(body, "choices").Array() {
		c := &ans.Choices[i]
		c.Reasoning = ch.Get("message.reasoning_content").Str
		for _, b := range ch.Get("message.thinking_blocks").Array() {
			c.ThinkingBlocks = append(c.ThinkingBlocks, b.Raw)
		}
	}
	return ans
}

func answerOf(cc openai.ChatCompletion) Answer {
	u := cc.Usage
	a := Answer{
		ID: cc.ID, Model: cc.Model, Created: cc.Created,
		Usage: Usage{u.PromptTokens, u.CompletionTokens, u.TotalTokens,
			u.PromptTokensDetails.CachedTokens, u.CompletionTokensDetails.ReasoningTokens},
	}
	for _, ch := range cc.Choices {
		c := Choice{
			Index: ch.Index, Content: ch.Message.Content, Refusal: ch.Message.Refusal,
			FinishReason: ch.FinishReason,
		}
		for _, tc := range ch.Message.ToolCalls {
			c.ToolCalls = append(c.ToolCalls, ToolCall{tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments})
		}
		for _, lp := range ch.Logprobs.Content {
			c.Logprobs = append(c.Logprobs, Logprob{lp.Token, lp.Logprob, lp.Bytes, len(lp.TopLogprobs)})
		}
		a.Choices = append(a.Choices, c)
	}
	return a
}

// StreamMatchesAnswer checks that the unified stream, read as a client
// reads it (see Accumulate), says what the unified answer body says: id,
// model and created, and for every choice its content, refusal, reasoning,
// thinking blocks, every tool call's id, type, name and arguments, its
// finish reason and logprobs; and the usage, which the stream carries only
// with opts.IncludeUsage (without, it must carry none). The stream must
// end with [DONE].
func StreamMatchesAnswer(t testing.TB, stream, answer []byte, opts providers.StreamOptions) {
	t.Helper()
	acc := Accumulate(t, stream)
	if !acc.Done {
		t.Fatalf("the stream did not end with [DONE]:\n%s", stream)
	}
	streamed, whole := acc.Answer(), AnswerOf(t, answer)
	if !opts.IncludeUsage {
		if streamed.Usage != (Usage{}) {
			t.Errorf("usage without include_usage: %+v", streamed.Usage)
		}
		whole.Usage = Usage{}
	}
	if msg := diffAnswers(streamed, whole); msg != "" {
		t.Errorf("the stream and the answer differ: %s\nstreamed: %+v\nanswer:   %+v", msg, streamed, whole)
	}
}

// diffAnswers names the first field in which a and b differ, or returns "".
func diffAnswers(a, b Answer) string {
	switch {
	case a.ID != b.ID || a.Model != b.Model || a.Created != b.Created:
		return fmt.Sprintf("id, model, created %q %q %d and %q %q %d", a.ID, a.Model, a.Created, b.ID, b.Model, b.Created)
	case a.Usage != b.Usage:
		return fmt.Sprintf("usage %+v and %+v", a.Usage, b.Usage)
	case len(a.Choices) != len(b.Choices):
		return fmt.Sprintf("%d and %d choices", len(a.Choices), len(b.Choices))
	}
	for i := range a.Choices {
		if !reflect.DeepEqual(a.Choices[i], b.Choices[i]) {
			return fmt.Sprintf("choice %d:\n  %+v\n  %+v", i, a.Choices[i], b.Choices[i])
		}
	}
	return ""
}
