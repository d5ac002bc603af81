package providers

import (
	"encoding/json"
	"testing"
)

func TestUsageAppend(t *testing.T) {
	tests := []struct {
		name string
		u    Usage
		want string
	}{
		{"counts only", Usage{Prompt: 10, Completion: 5, Total: 15, Cached: 7, Audio: 3, Reasoning: 2},
			`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`},
		{"cached", Usage{Prompt: 10, Completion: 5, Total: 15, Cached: 7, HasCached: true},
			`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":7}}`},
		{"cached zero", Usage{Prompt: 1, Completion: 2, Total: 3, HasCached: true},
			`{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}`},
		{"audio alone", Usage{Prompt: 10, Completion: 5, Total: 15, Audio: 3, HasAudio: true},
			`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"audio_tokens":3}}`},
		{"everything", Usage{Prompt: 10, Completion: 5, Total: 16, Cached: 7, HasCached: true, Audio: 3, HasAudio: true, Reasoning: 2, HasReasoning: true},
			`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":16,"prompt_tokens_details":{"cached_tokens":7,"audio_tokens":3},"completion_tokens_details":{"reasoning_tokens":2}}`},
		{"reasoning", Usage{Prompt: 10, Completion: 5, Total: 15, Reasoning: 2, HasReasoning: true},
			`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"completion_tokens_details":{"reasoning_tokens":2}}`},
	}
	for _, tt := range tests {
		if got := string(tt.u.Append([]byte("x"))); got != "x"+tt.want {
			t.Errorf("%s: %s, want x%s", tt.name, got, tt.want)
		}
	}
}

func TestAppendChunkEnd(t *testing.T) {
	tests := []struct {
		finish       string
		includeUsage bool
		want         string
	}{
		{"", false, `,"finish_reason":null}]}` + "\n\n"},
		{"", true, `,"finish_reason":null}],"usage":null}` + "\n\n"},
		{"tool_calls", false, `,"finish_reason":"tool_calls"}]}` + "\n\n"},
		{"stop", true, `,"finish_reason":"stop"}],"usage":null}` + "\n\n"},
	}
	for _, tt := range tests {
		got := AppendChunkEnd([]byte(`data: {"choices":[{"index":0,"delta":{}`), tt.finish, tt.includeUsage)
		if string(got) != `data: {"choices":[{"index":0,"delta":{}`+tt.want {
			t.Errorf("AppendChunkEnd(%q, %v) = %q", tt.finish, tt.includeUsage, got)
		}
		if !json.Valid(got[len("data: ") : len(got)-2]) {
			t.Errorf("not JSON: %s", got)
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
