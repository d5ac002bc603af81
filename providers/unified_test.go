package providers

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

func TestUsageAppend(t *testing.T) {
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
		if got := string(tt.u.Append([]byte("x"))); got != "x"+tt.want {
			t.Errorf("%s: %s, want x%s", name, got, tt.want)
		}
	}
}

func TestAppendChunkEnd(t *testing.T) {
	// The end of a chunk for each finish_reason, without and with usage.
	for finish, want := range map[string][2]string{
		"":           {`,"finish_reason":null}]}`, `,"finish_reason":null}],"usage":null}`},
		"stop":       {`,"finish_reason":"stop"}]}`, `,"finish_reason":"stop"}],"usage":null}`},
		"tool_calls": {`,"finish_reason":"tool_calls"}]}`, `,"finish_reason":"tool_calls"}],"usage":null}`},
	} {
		for i, includeUsage := range []bool{false, true} {
			got := AppendChunkEnd([]byte(`data: {"choices":[{"index":0,"delta":{}`), finish, includeUsage)
			if string(got) != `data: {"choices":[{"index":0,"delta":{}`+want[i]+"\n\n" {
				t.Errorf("AppendChunkEnd(%q, %v) = %q", finish, includeUsage, got)
			}
			if !json.Valid(got[len("data: ") : len(got)-2]) {
				t.Errorf("not JSON: %s", got)
			}
		}
	}
}

func TestAppendUsageChunk(t *testing.T) {
	head := []byte(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m",`)
	got := string(AppendUsageChunk([]byte("x"), head, Usage{Prompt: 1, Completion: 2, Total: 3}))
	want := `xdata: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}` + "\n\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestAppendStreamIncomplete(t *testing.T) {
	got := string(AppendStreamIncomplete([]byte("x")))
	want := `xdata: {"error":{"message":"the provider's stream ended before the answer was complete","type":"server_error","param":null,"code":"stream_incomplete"}}` + "\n\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
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
		if got := string(j.Append([]byte("x:"))); got != "x:"+tt.want || j.Len() != len(tt.in) {
			t.Errorf("TextJoin of %q = %s (%d), want %s", tt.in, got, j.Len(), tt.want)
		}
	}
}
