package providers

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/jsonw"
)

func TestUsageWrite(t *testing.T) {
	for name, tt := range map[string]struct {
		u    Usage
		want string
	}{
		"counts only": {Usage{Prompt: 10, Completion: 5, Total: 15, Cached: 7, Audio: 3, Reasoning: 2},
			`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`},
		"cached": {Usage{Prompt: 10, Completion: 5, Total: 15, Cached: 7, HasCached: true},
			`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":7}}`},
		"cached zero": {Usage{Prompt: 1, Completion: 2, Total: 3, HasCached: true},
			`{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}`},
		"audio alone": {Usage{Prompt: 10, Completion: 5, Total: 15, Audio: 3, HasAudio: true},
			`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"audio_tokens":3}}`},
		"everything": {Usage{Prompt: 10, Completion: 5, Total: 16, Cached: 7, HasCached: true, Audio: 3, HasAudio: true, Reasoning: 2, HasReasoning: true},
			`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":16,"prompt_tokens_details":{"cached_tokens":7,"audio_tokens":3},"completion_tokens_details":{"reasoning_tokens":2}}`},
		"reasoning": {Usage{Prompt: 10, Completion: 5, Total: 15, Reasoning: 2, HasReasoning: true},
			`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"completion_tokens_details":{"reasoning_tokens":2}}`},
	} {
		w := jsonw.New([]byte("x"))
		tt.u.Write(w.Value())
		if got, err := w.Finish(); err != nil || string(got) != "x"+tt.want {
			t.Errorf("%s: %s, want x%s", name, got, tt.want)
		}
	}
}

func TestTextJoin(t *testing.T) {
	for _, tt := range []struct {
		in   []string // raw JSON values added
		want string
	}{
		{nil, `null`},
		{[]string{`"a \u00e9"`}, `"a \u00e9"`}, // one: kept as it was written
		{[]string{`"a "`, `"b\n"`, `"c"`}, `"a b\nc"`},
		{[]string{`""`}, `""`},
		{[]string{`7`}, `""`},
		{[]string{`"x"`, `null`}, `"x"`},
	} {
		var j TextJoin
		for _, raw := range tt.in {
			j.Add(gjson.Parse(raw))
		}
		w := jsonw.New([]byte("x:"))
		j.Write(w.Value())
		if got, err := w.Finish(); err != nil || string(got) != "x:"+tt.want || j.Len() != len(tt.in) {
			t.Errorf("TextJoin of %q = %s (%d), want %s", tt.in, got, j.Len(), tt.want)
		}
	}
}
