package gemini

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
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

// TestStreamMatchesAnswer checks, for every recorded stream that completes,
// that the OpenAI SDK's ChatCompletionAccumulator, fed the translated
// stream, gets what the translated non-streamed answer to the same
// generation says: content, refusal, every tool call's id, name and
// arguments, finish reasons, logprobs and usage; and that the reasoning and
// thinking blocks of the deltas add up to the message's.
func TestStreamMatchesAnswer(t *testing.T) {
	opts := providers.StreamOptions{IncludeUsage: true}
	compared := 0
	for _, path := range translatortest.Transcripts(t, sseDir, ".txt") {
		upstream, _, _ := translatortest.ReadTranscript(t, path)
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		t.Run(name, func(t *testing.T) {
			out, err := testReplay.Translate(opts, upstream, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) {
				t.Skip("the stream does not complete")
			}
			compared++
			answer, _, err := testChat().ChatResponse(mergeStream(t, upstream))
			if err != nil {
				t.Fatal(err)
			}
			providerkit.StreamMatchesAnswer(t, out, answer, opts)
		})
	}
	if compared < 8 {
		t.Errorf("only %d transcripts complete; the comparison needs more", compared)
	}
}
