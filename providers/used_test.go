package providers

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/jsonw"
)

// TestReadUsage reads usage from chat answers.
func TestReadUsage(t *testing.T) {
	for _, tc := range []struct {
		name, usage string
		want        Used
	}{
		{"every count", `{"prompt_tokens":1200,"completion_tokens":300,"total_tokens":1500,"prompt_tokens_details":{"cached_tokens":200,"audio_tokens":0,"cache_write_tokens":100},"completion_tokens_details":{"reasoning_tokens":120,"audio_tokens":0}}`,
			Used{Prompt: 1200, Completion: 300, Cached: 200, CacheWrite: 100, Reasoning: 120, Known: true}},
		{"one-hour cache writes", `{"prompt_tokens":6100,"completion_tokens":100,"prompt_tokens_details":{"cached_tokens":2000,"cache_write_tokens":3000,"cache_write_1h_tokens":1000}}`,
			Used{Prompt: 6100, Completion: 100, Cached: 2000, CacheWrite: 3000, CacheWrite1h: 1000, Known: true}},
		{"no details", `{"prompt_tokens":14,"completion_tokens":10,"total_tokens":24}`, Used{Prompt: 14, Completion: 10, Known: true}},
		{"details null", `{"prompt_tokens":14,"completion_tokens":10,"prompt_tokens_details":null,"completion_tokens_details":null}`, Used{Prompt: 14, Completion: 10, Known: true}},
		{"a key given twice: the first counts", `{"prompt_tokens":5,"prompt_tokens":7,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":2},"prompt_tokens_details":{"cached_tokens":3}}`,
			Used{Prompt: 5, Completion: 1, Cached: 2, Known: true}},
		{"empty", `{}`, Used{Known: true}},
		{"null", `null`, Used{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReadAnswerUsage([]byte(`{"id":"chatcmpl-1","choices":[],"usage":` + tc.usage + `}`)); got != tc.want {
				t.Errorf("answer: %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := ReadAnswerUsage([]byte(`{"id":"chatcmpl-1","choices":[]}`)); got.Known {
		t.Errorf("an answer without usage: %+v", got)
	}
}

// TestUsageUsed: the usage a unified usage object is written from is what
// reading the object back gives.
func TestUsageUsed(t *testing.T) {
	for _, u := range []Usage{
		{Prompt: 14, Completion: 10, Total: 24},
		{Prompt: 1200, Completion: 300, Total: 1500, Cached: 200, HasCached: true, Reasoning: 120, HasReasoning: true, Audio: 3, HasAudio: true},
		{Prompt: 6100, Completion: 100, Total: 6200, Cached: 2000, HasCached: true, CacheWrite: 3000, HasCacheWrite: true, CacheWrite1h: 1000, HasCacheWrite1h: true},
		{Prompt: 5, Completion: 1, Cached: 9, Reasoning: 7, CacheWrite: 3, CacheWrite1h: 2}, // details not written
	} {
		b := appendUsage(u)
		if got := ReadUsage(gjson.ParseBytes(b)); got != u.Used() {
			t.Errorf("%s reads as %+v, Used() is %+v", b, got, u.Used())
		}
	}
}

// FuzzReadUsage: on any valid JSON, ReadUsage reads what gjson's walk of
// the usage object and lookups by path read (readUsageReference); on
// anything, it does not panic.
func FuzzReadUsage(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":1200,"completion_tokens":300,"prompt_tokens_details":{"cached_tokens":200,"cache_write_tokens":100,"cache_write_1h_tokens":40},"completion_tokens_details":{"reasoning_tokens":120}}`,
		`{"prompt_tokens":"14","completion_tokens":1.5e1,"prompt_tokens_details":null,"completion_tokens_details":[1],"prompt_tokens":7}`,
		`{"pr\u006fmpt_tokens":true,"completion_tokens":-3,"prompt_tokens_details":{"cached_tokens":{"x":1}}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, usage string) {
		got := ReadUsage(gjson.Parse(usage))
		if !gjson.Valid(usage) {
			return
		}
		if want := readUsageReference(gjson.Parse(usage)); got != want {
			t.Fatalf("%s: %+v, want %+v", usage, got, want)
		}
	})
}

// readUsageReference is ReadUsage done with gjson's walk and lookups.
func readUsageReference(v gjson.Result) Used {
	var u Used
	if !v.IsObject() {
		return u
	}
	first := func(k string) gjson.Result { return v.Get(gjson.Escape(k)) }
	u.Known = true
	u.Prompt, u.Completion = first("prompt_tokens").Int(), first("completion_tokens").Int()
	if d := first("prompt_tokens_details"); d.IsObject() {
		u.Cached, u.CacheWrite = d.Get("cached_tokens").Int(), d.Get("cache_write_tokens").Int()
		u.CacheWrite1h = d.Get("cache_write_1h_tokens").Int()
	}
	if d := first("completion_tokens_details"); d.IsObject() {
		u.Reasoning = d.Get("reasoning_tokens").Int()
	}
	return u
}

// appendUsage writes u as Usage.Write does.
func appendUsage(u Usage) []byte {
	w := jsonw.New(nil)
	u.Write(w.Value())
	b, _ := w.Finish()
	return b
}
