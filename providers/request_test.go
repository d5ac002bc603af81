package providers

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestAppendChatMessages(t *testing.T) {
	v := gjson.Parse(`[
		{"role":"user","content":"a","role":"tool","content":[],"name":"n"},
		{"role":"assistant","content":null,"reasoning_content":"r","reasoning":"s","thinking_blocks":[{"type":"thinking"}],
		 "tool_calls":[{"id":"c"}]},
		{"role":"tool","tool_call_id":"c","tool_call_id":"d","content":"x"},
		{}
	]`)
	var stack [2]ChatMessage
	msgs := AppendChatMessages(stack[:1], v)
	if len(msgs) != 5 || msgs[0].Role != "" || msgs[0].Content.Exists() {
		t.Fatalf("appended %d messages after the first", len(msgs)-1)
	}
	type want struct{ role, content, toolCalls, toolCallID, thinkingBlocks, reasoningContent, reasoning string }
	for i, w := range []want{
		{"user", `"a"`, "", "", "", "", ""}, // of duplicate keys the first counts
		{"assistant", "null", `[{"id":"c"}]`, "", `[{"type":"thinking"}]`, `"r"`, `"s"`},
		{"tool", `"x"`, "", `"c"`, "", "", ""},
		{"", "", "", "", "", "", ""},
	} {
		m := msgs[i+1]
		got := want{m.Role, m.Content.Raw, m.ToolCalls.Raw, m.ToolCallID.Raw, m.ThinkingBlocks.Raw, m.ReasoningContent.Raw, m.Reasoning.Raw}
		if got != w {
			t.Errorf("message %d = %+v, want %+v", i, got, w)
		}
	}
}

func TestWantsAudio(t *testing.T) {
	for in, want := range map[string]bool{
		`["text","audio"]`: true,
		`["audio"]`:        true,
		`["text"]`:         false,
		`[]`:               false,
		`null`:             false,
		`"audio"`:          true, // a bare value counts as a list of one
		`["AUDIO"]`:        false,
	} {
		if got := WantsAudio(gjson.Parse(in)); got != want {
			t.Errorf("WantsAudio(%s) = %v, want %v", in, got, want)
		}
	}
}

func TestAppendStops(t *testing.T) {
	for in, want := range map[string]string{
		`"END"`:              `x["END"]`,
		`["a","","b \"c\""]`: `x["a","b \"c\""]`,
		`["\u00e9"]`:         `x["\u00e9"]`,
		`""`:                 `x`,
		`["",""]`:            `x`,
		`[]`:                 `x`,
		`null`:               `x`,
		`{"a":"b"}`:          `x`,
	} {
		got, n := AppendStops([]byte("x"), gjson.Parse(in))
		if string(got) != want || (n > 0) != (want != "x") {
			t.Errorf("AppendStops(%s) = %s, %d; want %s", in, got, n, want)
		}
	}
}
