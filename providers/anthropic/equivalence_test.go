package anthropic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
)

// TestStreamMatchesAnswer translates each transcript that has an answer of
// the same name in testdata/providers/anthropic/response (the same message,
// streamed and not), accumulates the unified stream with openai-go's
// ChatCompletionAccumulator (plus reasoning_content and thinking_blocks,
// which the SDK does not know), and checks that it equals the translated
// answer: content, reasoning, every tool call's id, name and arguments,
// the finish reason and the usage.
func TestStreamMatchesAnswer(t *testing.T) {
	opts := providers.StreamOptions{IncludeUsage: true}
	pairs := 0
	for _, path := range translatortest.Transcripts(t, sseDir, ".txt") {
		name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".txt"), "_include_usage")
		body, err := os.ReadFile(filepath.Join(responseDir, name+".anthropic.json"))
		if os.IsNotExist(err) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		pairs++
		t.Run(name, func(t *testing.T) {
			upstream, _, _ := translatortest.ReadTranscript(t, path)
			out, err := testReplay.Translate(opts, upstream, nil)
			if err != nil {
				t.Fatal(err)
			}
			unified, _, err := testChat.ChatResponse(body)
			if err != nil {
				t.Fatal(err)
			}
			providerkit.StreamMatchesAnswer(t, out, unified, opts)
		})
	}
	if pairs < 5 {
		t.Fatalf("only %d transcripts have an answer to compare with", pairs)
	}
}
