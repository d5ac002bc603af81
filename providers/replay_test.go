package providers_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
)

// A stored chat.completion replayed as a stream says, to the OpenAI SDK's
// accumulator, what the completion says: every unified answer of the
// translators' goldens, with and without include_usage.
func TestReplayChat(t *testing.T) {
	files, err := filepath.Glob("../testdata/providers/*/response/*.unified.json")
	if err != nil || len(files) < 20 {
		t.Fatalf("goldens: %d, %v", len(files), err)
	}
	files = append(files, "testdata/replay/choices.unified.json")
	for _, f := range files {
		name := strings.TrimSuffix(f[strings.Index(f, "providers/")+len("providers/"):], ".unified.json")
		t.Run(name, func(t *testing.T) {
			// Compact, as answers are; the goldens are indented.
			answer := []byte(providers.CompactJSON(string(translatortest.ReadFile(t, f))))
			for _, include := range []bool{false, true} {
				out, err := providers.ReplayChat(nil, answer, include)
				if err != nil {
					t.Fatal(err)
				}
				opts := providers.StreamOptions{IncludeUsage: include}
				providerkit.CheckUnifiedStream(t, out, opts)
				providerkit.StreamMatchesAnswer(t, out, answer, opts)
			}
		})
	}
}

// The replay of an answer with logprobs, a refusal and annotations
// carries them; what is not a chat.completion is refused.
func TestReplayChatDetails(t *testing.T) {
	answer := `{"id":"chatcmpl-9","object":"chat.completion","created":1,"model":"m","choices":[` +
		`{"index":0,"message":{"role":"assistant","content":"Hi","refusal":null,"annotations":[{"type":"url_citation","url_citation":{"url":"https://e.com","title":"E","start_index":0,"end_index":2}}]},` +
		`"logprobs":{"content":[{"token":"Hi","logprob":-0.1,"bytes":[72,105],"top_logprobs":[]}],"refusal":null},"finish_reason":"stop"},` +
		`{"index":1,"message":{"role":"assistant","content":null,"refusal":"I can't."},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":1,"cache_write_tokens":2}}}`
	out, err := providers.ReplayChat([]byte("prefix:"), []byte(answer), true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "prefix:") {
		t.Fatal("ReplayChat does not append to dst")
	}
	out = out[len("prefix:"):]
	for _, want := range []string{`"annotations":[{"type":"url_citation"`, `"refusal":"I can't."`, `"logprobs":{"content":[{"token":"Hi"`,
		`"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":1,"cache_write_tokens":2}}`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the replay lacks %s:\n%s", want, out)
		}
	}
	providerkit.StreamMatchesAnswer(t, out, []byte(answer), providers.StreamOptions{IncludeUsage: true})
	for _, bad := range []string{``, `{}`, `{"choices":{}}`, `[1]`, `{"choices":[`} {
		if out, err := providers.ReplayChat(nil, []byte(bad), false); err == nil || len(out) != 0 {
			t.Errorf("%q: %q, %v", bad, out, err)
		}
	}
}
