package gemini

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/sse"
)

// mergeStream builds the GenerateContentResponse that Gemini answers
// without streaming for the same generation as a recorded stream: each
// candidate's parts in order, its last finishReason, its logprobs joined,
// and the last usageMetadata and promptFeedback.
func mergeStream(t *testing.T, upstream []byte) []byte {
	t.Helper()
	type candidate struct {
		Index          int              `json:"index"`
		Content        map[string]any   `json:"content"`
		FinishReason   string           `json:"finishReason,omitempty"`
		LogprobsResult map[string][]any `json:"logprobsResult,omitempty"`
	}
	resp := map[string]any{}
	var cands []*candidate
	buf := upstream
	for {
		event, rest, ok, err := Framing.Cut(buf)
		if err != nil || !ok {
			break
		}
		buf = rest
		_, data := sse.Fields(event)
		if len(data) == 0 {
			continue
		}
		var chunk struct {
			ResponseID     string          `json:"responseId"`
			ModelVersion   string          `json:"modelVersion"`
			UsageMetadata  json.RawMessage `json:"usageMetadata"`
			PromptFeedback json.RawMessage `json:"promptFeedback"`
			Candidates     []struct {
				Index   *int `json:"index"`
				Content struct {
					Parts []json.RawMessage `json:"parts"`
				} `json:"content"`
				FinishReason   string           `json:"finishReason"`
				LogprobsResult map[string][]any `json:"logprobsResult"`
			} `json:"candidates"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		if _, seen := resp["responseId"]; !seen && chunk.ResponseID != "" {
			resp["responseId"] = chunk.ResponseID
			resp["modelVersion"] = chunk.ModelVersion
		}
		if chunk.UsageMetadata != nil {
			resp["usageMetadata"] = chunk.UsageMetadata
		}
		if chunk.PromptFeedback != nil {
			resp["promptFeedback"] = chunk.PromptFeedback
		}
		for n, c := range chunk.Candidates {
			i := n
			if c.Index != nil {
				i = *c.Index
			}
			for len(cands) <= i {
				cands = append(cands, &candidate{Index: len(cands), Content: map[string]any{"role": "model", "parts": []json.RawMessage{}}})
			}
			m := cands[i]
			m.Content["parts"] = append(m.Content["parts"].([]json.RawMessage), c.Content.Parts...)
			if c.FinishReason != "" {
				m.FinishReason = c.FinishReason
			}
			for k, v := range c.LogprobsResult {
				if m.LogprobsResult == nil {
					m.LogprobsResult = map[string][]any{}
				}
				m.LogprobsResult[k] = append(m.LogprobsResult[k], v...)
			}
		}
	}
	if cands != nil {
		resp["candidates"] = cands
	}
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// streamExtras collects, per choice, what the accumulator does not keep:
// the reasoning_content deltas joined and the thinking_blocks entries.
func streamExtras(out []byte) (reasoning map[int64]string, blocks map[int64][]string) {
	reasoning, blocks = map[int64]string{}, map[int64][]string{}
	for _, ev := range bytes.SplitAfter(out, []byte("\n\n")) {
		data := bytes.TrimSuffix(bytes.TrimPrefix(ev, []byte("data: ")), []byte("\n\n"))
		gjson.GetBytes(data, "choices").ForEach(func(_, ch gjson.Result) bool {
			i := ch.Get("index").Int()
			reasoning[i] += ch.Get("delta.reasoning_content").Str
			ch.Get("delta.thinking_blocks").ForEach(func(_, b gjson.Result) bool {
				blocks[i] = append(blocks[i], b.Raw)
				return true
			})
			return true
		})
	}
	return reasoning, blocks
}

// TestStreamMatchesAnswer checks, for every recorded stream that completes,
// that the OpenAI SDK's ChatCompletionAccumulator, fed the translated
// stream, gets what the translated non-streamed answer to the same
// generation says: content, refusal, every tool call's id, name and
// arguments, finish reasons, logprobs and usage; and that the reasoning and
// thinking blocks of the deltas add up to the message's.
func TestStreamMatchesAnswer(t *testing.T) {
	compared := 0
	for _, path := range transcripts(t) {
		upstream, _, _ := readTranscript(t, path)
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		t.Run(name, func(t *testing.T) {
			out, err := translate(testChat(), providers.StreamOptions{IncludeUsage: true}, upstream, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) {
				t.Skip("the stream does not complete")
			}
			compared++

			var acc openai.ChatCompletionAccumulator
			for _, ev := range bytes.SplitAfter(out, []byte("\n\n")) {
				data := bytes.TrimSuffix(bytes.TrimPrefix(ev, []byte("data: ")), []byte("\n\n"))
				if len(data) == 0 || data[0] != '{' {
					continue
				}
				var chunk openai.ChatCompletionChunk
				if err := json.Unmarshal(data, &chunk); err != nil {
					t.Fatal(err)
				}
				if !acc.AddChunk(chunk) {
					t.Fatalf("the accumulator refused %s", data)
				}
			}

			answer, err := testChat().ChatResponse(mergeStream(t, upstream))
			if err != nil {
				t.Fatal(err)
			}
			var want openai.ChatCompletion
			if err := json.Unmarshal(answer, &want); err != nil {
				t.Fatal(err)
			}
			got := acc.ChatCompletion
			if got.ID != want.ID || got.Model != want.Model || got.Created != want.Created || len(got.Choices) != len(want.Choices) {
				t.Fatalf("accumulated %s\nanswer %s", got.RawJSON(), answer)
			}
			for i := range want.Choices {
				g, w := got.Choices[i], want.Choices[i]
				if g.Index != w.Index || g.FinishReason != w.FinishReason || g.Message.Content != w.Message.Content ||
					g.Message.Refusal != w.Message.Refusal || len(g.Message.ToolCalls) != len(w.Message.ToolCalls) {
					t.Errorf("choice %d: accumulated %+v, answer %+v", i, g, w)
					continue
				}
				for k := range w.Message.ToolCalls {
					gc, wc := g.Message.ToolCalls[k], w.Message.ToolCalls[k]
					if gc.ID != wc.ID || gc.Type != wc.Type || gc.Function.Name != wc.Function.Name || gc.Function.Arguments != wc.Function.Arguments {
						t.Errorf("choice %d tool call %d: accumulated %+v, answer %+v", i, k, gc, wc)
					}
				}
				if len(g.Logprobs.Content) != len(w.Logprobs.Content) {
					t.Errorf("choice %d: %d logprobs accumulated, %d in the answer", i, len(g.Logprobs.Content), len(w.Logprobs.Content))
				}
				for k := range w.Logprobs.Content {
					gl, wl := g.Logprobs.Content[k], w.Logprobs.Content[k]
					if gl.Token != wl.Token || gl.Logprob != wl.Logprob || !reflect.DeepEqual(gl.Bytes, wl.Bytes) || len(gl.TopLogprobs) != len(wl.TopLogprobs) {
						t.Errorf("choice %d logprob %d: accumulated %+v, answer %+v", i, k, gl, wl)
					}
				}
			}
			gu, wu := got.Usage, want.Usage
			if gu.PromptTokens != wu.PromptTokens || gu.CompletionTokens != wu.CompletionTokens || gu.TotalTokens != wu.TotalTokens ||
				gu.PromptTokensDetails.CachedTokens != wu.PromptTokensDetails.CachedTokens ||
				gu.CompletionTokensDetails.ReasoningTokens != wu.CompletionTokensDetails.ReasoningTokens {
				t.Errorf("usage: accumulated %+v, answer %+v", gu, wu)
			}

			reasoning, blocks := streamExtras(out)
			gjson.GetBytes(answer, "choices").ForEach(func(_, ch gjson.Result) bool {
				i := ch.Get("index").Int()
				if r := ch.Get("message.reasoning_content").Str; reasoning[i] != r {
					t.Errorf("choice %d: reasoning deltas %q, answer %q", i, reasoning[i], r)
				}
				var want []string
				ch.Get("message.thinking_blocks").ForEach(func(_, b gjson.Result) bool {
					want = append(want, b.Raw)
					return true
				})
				if !reflect.DeepEqual(blocks[i], want) {
					t.Errorf("choice %d: thinking_blocks deltas %q, answer %q", i, blocks[i], want)
				}
				return true
			})
		})
	}
	if compared < 8 {
		t.Errorf("only %d transcripts complete; the comparison needs more", compared)
	}
}
