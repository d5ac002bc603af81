package providers

import (
	"errors"
	"slices"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/jsonw"
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

func TestWriteStops(t *testing.T) {
	for in, want := range map[string]string{
		`"END"`:              `{"stop":["END"]}`,
		`["a","","b \"c\""]`: `{"stop":["a","b \"c\""]}`,
		`["\u00e9"]`:         `{"stop":["\u00e9"]}`,
		`""`:                 `{}`,
		`["",""]`:            `{}`,
		`[]`:                 `{}`,
		`null`:               `{}`,
		`{"a":"b"}`:          `{}`,
	} {
		w := jsonw.New(nil)
		o := w.Object()
		n := WriteStops(o, "stop", gjson.Parse(in))
		o.End()
		got, err := w.Finish()
		if err != nil || string(got) != want || (n > 0) != (want != "{}") {
			t.Errorf("WriteStops(%s) = %s, %d, %v; want %s", in, got, n, err, want)
		}
	}
}

func TestWriteSystemTexts(t *testing.T) {
	msgs := []ChatMessage{
		{Role: "system", Content: gjson.Parse(`"be brief"`)},
		{Role: "user", Content: gjson.Parse(`"hi"`)},
		{Role: "developer", Content: gjson.Parse(`[{"type":"text","text":""},{"type":"text","text":"a\u0041"},{"type":"refusal","refusal":"r"}]`)},
		{Role: "system", Content: gjson.Parse(`""`)},
	}
	w := jsonw.New(nil)
	a := w.Array()
	n := WriteSystemTexts(a, msgs)
	a.End()
	got, err := w.Finish()
	if want := `[{"text":"be brief"},{"text":"a\u0041"},{"text":"r"}]`; err != nil || string(got) != want || n != 3 {
		t.Errorf("WriteSystemTexts = %s, %d, %v; want %s", got, n, err, want)
	}
}

func TestReadMembers(t *testing.T) {
	var seen []string
	stop := errors.New("stop")
	err := ReadMembers([]byte(`{"a":1,"b":"x","a":2,"c":null}`), func(key string, v gjson.Result) error {
		seen = append(seen, key+"="+v.Raw)
		if key == "c" {
			return stop
		}
		return nil
	})
	if want := []string{"a=1", `b="x"`, "a=2", "c=null"}; !errors.Is(err, stop) || !slices.Equal(seen, want) {
		t.Errorf("ReadMembers: %v, saw %q; want %v, %q", err, seen, stop, want)
	}
	seen = nil
	if err := ReadMembers([]byte(`{"a":1,"b":2}`), func(key string, _ gjson.Result) error {
		seen = append(seen, key)
		return stop
	}); !errors.Is(err, stop) || len(seen) != 1 {
		t.Errorf("ReadMembers went on after an error: %v, saw %q", err, seen)
	}
}

// TestNoEquivalent: the fields no translated provider expresses are refused
// naming the field; the same fields absent or null, and every other field,
// are not.
func TestNoEquivalent(t *testing.T) {
	for _, tt := range []struct {
		key, value string
		refused    bool
	}{
		{"audio", `{"voice":"alloy","format":"mp3"}`, true},
		{"audio", `null`, false},
		{"functions", `[{"name":"f"}]`, true},
		{"function_call", `"auto"`, true},
		{"web_search_options", `{}`, true},
		{"modalities", `["text","audio"]`, true},
		{"modalities", `["text"]`, false},
		{"temperature", `0.5`, false},
	} {
		err := NoEquivalent(tt.key, gjson.Parse(tt.value), "toy")
		if !tt.refused {
			if err != nil {
				t.Errorf("%s %s: %v, want nil", tt.key, tt.value, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Status != 400 || e.Param != tt.key || e.Code != "unsupported_parameter" {
			t.Errorf("%s %s: %#v, want a 400 unsupported_parameter naming it", tt.key, tt.value, err)
		}
	}
}
