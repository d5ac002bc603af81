package responses

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

const (
	requestDir  = "../../testdata/providers/responses/request"
	responseDir = "../../testdata/providers/responses/response"
	sseDir      = "../../testdata/sse/responses"
)

// testTranslator returns a Translator with a fixed clock and ids that
// count per prefix (resp_0001, msg_0001, …), so that goldens are stable.
func testTranslator() Translator {
	n := map[string]int{}
	return Translator{
		Now: translatortest.Now,
		NewID: func(prefix string) string {
			n[prefix]++
			return fmt.Sprintf("%s%04d", prefix, n[prefix])
		},
	}
}

// newX parses body and starts an exchange with tr, as the gateway does.
func newX(tr Translator, body, history []byte) (*Exchange, error) {
	r, err := Parse(body)
	if err != nil {
		return nil, err
	}
	return tr.New(r, history)
}

// TestRequestGolden translates each <name>.responses.json (continuing the
// conversation in <name>.history.json, if there is one) into the hub
// request <name>.chat.json, which must pass the hub's own validation.
func TestRequestGolden(t *testing.T) {
	translatortest.Golden(t, requestDir, ".responses.json", ".chat.json", func(t *testing.T, name string, body []byte) []byte {
		history := translatortest.ReadOptional(t, filepath.Join(requestDir, name+".history.json"))
		info, err := Validate(body)
		if err != nil {
			t.Fatalf("Validate: %v", err)
		}
		if (info.PreviousResponseID != "") != (history != nil) {
			t.Fatalf("previous_response_id %q, but history file present: %v", info.PreviousResponseID, history != nil)
		}
		x, err := newX(testTranslator(), body, history)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		chat := x.ChatBody()
		hub, err := providers.ValidateChat(chat)
		if err != nil {
			t.Fatalf("the hub request does not pass ValidateChat: %v\n%s", err, translatortest.Indent(t, chat))
		}
		if hub.Model != info.Model || hub.Stream != info.Stream || hub.IncludeUsage != info.Stream {
			t.Errorf("hub model/stream/include_usage = %q/%v/%v, want %q/%v/%v",
				hub.Model, hub.Stream, hub.IncludeUsage, info.Model, info.Stream, info.Stream)
		}
		return chat
	})
}

func TestValidateInfo(t *testing.T) {
	tests := []struct {
		body string
		want Info
	}{
		{`{"model":"m","input":"hi"}`, Info{Model: "m", Store: true}},
		{`{"model":"m","input":"hi","stream":true,"store":false}`, Info{Model: "m", Stream: true}},
		{`{"model":"m","previous_response_id":"resp_1","store":null,"stream":null}`, Info{Model: "m", Store: true, PreviousResponseID: "resp_1"}},
	}
	for _, tt := range tests {
		got, err := Validate([]byte(tt.body))
		if err != nil {
			t.Errorf("%s: %v", tt.body, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%s: Info = %+v, want %+v", tt.body, got, tt.want)
		}
	}
}

// TestRequestErrors checks each malformed or unservable request gets a 400
// in OpenAI's shape with the param and code that name the problem.
func TestRequestErrors(t *testing.T) {
	const fn = `{"type":"function","name":"f","parameters":{"type":"object"}}`
	tests := []struct {
		name, body, param, code string
	}{
		{"not JSON", `{"model":`, "", "invalid_json"},
		{"not an object", `["model"]`, "", "invalid_json"},
		{"too deep", `{"model":"m","input":` + strings.Repeat("[", 1200) + strings.Repeat("]", 1200) + `}`, "", "invalid_json"},
		{"no model", `{"input":"hi"}`, "model", "invalid_value"},
		{"model not a string", `{"model":7,"input":"hi"}`, "model", "invalid_value"},
		{"duplicate key", `{"model":"m","input":"a","input":"b"}`, "input", "invalid_value"},
		{"no input", `{"model":"m"}`, "input", "invalid_value"},
		{"input a number", `{"model":"m","input":3}`, "input", "invalid_value"},
		{"empty input", `{"model":"m","input":[]}`, "input", "invalid_value"},
		{"only reasoning", `{"model":"m","input":[{"type":"reasoning","summary":[]}]}`, "input", "invalid_value"},
		{"item not an object", `{"model":"m","input":["hi"]}`, "input[0]", "invalid_value"},
		{"item without type", `{"model":"m","input":[{"content":"hi"}]}`, "input[0].type", "invalid_value"},
		{"unknown role", `{"model":"m","input":[{"role":"tool","content":"hi"}]}`, "input[0].role", "invalid_value"},
		{"message without content", `{"model":"m","input":[{"role":"user"}]}`, "input[0].content", "invalid_value"},
		{"unknown part", `{"model":"m","input":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "input[0].content[0].type", "invalid_value"},
		{"text part without text", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text"}]}]}`, "input[0].content[0].text", "invalid_value"},
		{"image by file id", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1","detail":"auto"}]}]}`, "input[0].content[0].file_id", "unsupported_parameter"},
		{"image without url", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","detail":"auto"}]}]}`, "input[0].content[0].image_url", "invalid_value"},
		{"image in a system message", `{"model":"m","input":[{"role":"system","content":[{"type":"input_image","image_url":"https://x/y.png"}]}]}`, "input[0].content[0].type", "invalid_value"},
		{"file by id", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-1"}]}]}`, "input[0].content[0].file_id", "unsupported_parameter"},
		{"file by url", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://x/a.pdf"}]}]}`, "input[0].content[0].file_url", "unsupported_parameter"},
		{"refusal from the user", `{"model":"m","input":[{"role":"user","content":[{"type":"refusal","refusal":"no"}]}]}`, "input[0].content[0].type", "invalid_value"},
		{"function call without call_id", `{"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "input[0].call_id", "invalid_value"},
		{"function call with object arguments", `{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":{}}]}`, "input[0].arguments", "invalid_value"},
		{"custom call without input", `{"model":"m","input":[{"type":"custom_tool_call","call_id":"c","name":"f"}]}`, "input[0].input", "invalid_value"},
		{"output without output", `{"model":"m","input":[{"type":"function_call_output","call_id":"c"}]}`, "input[0].output", "invalid_value"},
		{"output of a number", `{"model":"m","input":[{"type":"custom_tool_call_output","call_id":"c","output":1}]}`, "input[0].output", "invalid_value"},
		{"reasoning without summary", `{"model":"m","input":[{"type":"reasoning"}]}`, "input[0].summary", "invalid_value"},
		{"only a search's record", `{"model":"m","input":[{"type":"web_search_call","id":"ws_1"}]}`, "input", "invalid_value"},
		{"local shell item", `{"model":"m","input":[{"type":"local_shell_call","call_id":"c"}]}`, "input[0].type", "unsupported_parameter"},
		{"unknown reference", `{"model":"m","input":[{"role":"user","content":"a"},{"type":"item_reference","id":"msg_x"}]}`, "input[1].id", "invalid_value"},
		{"reference without id", `{"model":"m","input":[{"type":"item_reference"}]}`, "input[0].id", "invalid_value"},
		{"instructions not a string", `{"model":"m","input":"a","instructions":["x"]}`, "instructions", "invalid_value"},
		{"unknown tool", `{"model":"m","input":"a","tools":[{"type":"teleport"}]}`, "tools[0].type", "unsupported_parameter"},
		{"namespace without tools", `{"model":"m","input":"a","tools":[{"type":"namespace","name":"n"}]}`, "tools[0].tools", "invalid_value"},
		{"namespace of a built-in", `{"model":"m","input":"a","tools":[{"type":"namespace","name":"n","tools":[{"type":"web_search"}]}]}`, "tools[0].tools[0].type", "unsupported_parameter"},
		{"namespace name with the separator", `{"model":"m","input":"a","tools":[{"type":"namespace","name":"a__b","tools":[]}]}`, "tools[0].name", "invalid_value"},
		{"flattened name taken", `{"model":"m","input":"a","tools":[{"type":"function","name":"n__f"},{"type":"namespace","name":"n","tools":[{"type":"function","name":"f"}]}]}`, "tools[1].tools[0].name", "invalid_value"},
		{"search call without call_id", `{"model":"m","input":[{"type":"tool_search_call","arguments":{}}]}`, "input[0].call_id", "invalid_value"},
		{"search output of a string", `{"model":"m","input":[{"type":"tool_search_output","call_id":"c","tools":"x"}]}`, "input[0].tools", "invalid_value"},
		{"function without name", `{"model":"m","input":"a","tools":[{"type":"function","parameters":{}}]}`, "tools[0].name", "invalid_value"},
		{"parameters not an object", `{"model":"m","input":"a","tools":[{"type":"function","name":"f","parameters":"x"}]}`, "tools[0].parameters", "invalid_value"},
		{"strict not a bool", `{"model":"m","input":"a","tools":[{"type":"function","name":"f","strict":"yes"}]}`, "tools[0].strict", "invalid_value"},
		{"duplicate tool name", `{"model":"m","input":"a","tools":[` + fn + `,{"type":"custom","name":"f"}]}`, "tools[1].name", "invalid_value"},
		{"bad grammar syntax", `{"model":"m","input":"a","tools":[{"type":"custom","name":"g","format":{"type":"grammar","syntax":"ebnf","definition":"x"}}]}`, "tools[0].format.syntax", "invalid_value"},
		{"grammar without definition", `{"model":"m","input":"a","tools":[{"type":"custom","name":"g","format":{"type":"grammar","syntax":"lark"}}]}`, "tools[0].format.definition", "invalid_value"},
		{"tool_choice unknown string", `{"model":"m","input":"a","tools":[` + fn + `],"tool_choice":"any"}`, "tool_choice", "invalid_value"},
		{"tool_choice required without tools", `{"model":"m","input":"a","tool_choice":"required"}`, "tool_choice", "invalid_value"},
		{"tool_choice unknown function", `{"model":"m","input":"a","tools":[` + fn + `],"tool_choice":{"type":"function","name":"g"}}`, "tool_choice.name", "invalid_value"},
		{"tool_choice custom names a function", `{"model":"m","input":"a","tools":[` + fn + `],"tool_choice":{"type":"custom","name":"f"}}`, "tool_choice.name", "invalid_value"},
		{"tool_choice hosted", `{"model":"m","input":"a","tools":[` + fn + `],"tool_choice":{"type":"file_search"}}`, "tool_choice.type", "unsupported_parameter"},
		{"allowed_tools bad mode", `{"model":"m","input":"a","tools":[` + fn + `],"tool_choice":{"type":"allowed_tools","mode":"none","tools":[]}}`, "tool_choice.mode", "invalid_value"},
		{"allowed_tools unknown tool", `{"model":"m","input":"a","tools":[` + fn + `],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"g"}]}}`, "tool_choice.tools[0].name", "invalid_value"},
		{"allowed_tools hosted", `{"model":"m","input":"a","tools":[` + fn + `],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"mcp","server_label":"x"}]}}`, "tool_choice.tools[0].type", "unsupported_parameter"},
		{"allowed_tools empty", `{"model":"m","input":"a","tools":[` + fn + `],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}}`, "tool_choice.tools", "invalid_value"},
		{"text format unknown", `{"model":"m","input":"a","text":{"format":{"type":"xml"}}}`, "text.format.type", "invalid_value"},
		{"json_schema without name", `{"model":"m","input":"a","text":{"format":{"type":"json_schema","schema":{}}}}`, "text.format.name", "invalid_value"},
		{"json_schema without schema", `{"model":"m","input":"a","text":{"format":{"type":"json_schema","name":"n"}}}`, "text.format.schema", "invalid_value"},
		{"verbosity unknown", `{"model":"m","input":"a","text":{"verbosity":"loud"}}`, "text.verbosity", "invalid_value"},
		{"effort unknown", `{"model":"m","input":"a","reasoning":{"effort":"extreme"}}`, "reasoning.effort", "invalid_value"},
		{"summary unknown", `{"model":"m","input":"a","reasoning":{"summary":"brief"}}`, "reasoning.summary", "invalid_value"},
		{"max_output_tokens too small", `{"model":"m","input":"a","max_output_tokens":8}`, "max_output_tokens", "invalid_value"},
		{"max_output_tokens fractional", `{"model":"m","input":"a","max_output_tokens":100.5}`, "max_output_tokens", "invalid_value"},
		{"temperature a string", `{"model":"m","input":"a","temperature":"hot"}`, "temperature", "invalid_value"},
		{"top_logprobs too many", `{"model":"m","input":"a","top_logprobs":21}`, "top_logprobs", "invalid_value"},
		{"stream a string", `{"model":"m","input":"a","stream":"yes"}`, "stream", "invalid_value"},
		{"include a number", `{"model":"m","input":"a","include":[1]}`, "include[0]", "invalid_value"},
		{"metadata number value", `{"model":"m","input":"a","metadata":{"k":1}}`, "metadata.k", "invalid_value"},
		{"metadata too many keys", `{"model":"m","input":"a","metadata":{` + manyKeys(17) + `}}`, "metadata", "invalid_value"},
		{"background", `{"model":"m","input":"a","background":true}`, "background", "unsupported_parameter"},
		{"conversation", `{"model":"m","input":"a","conversation":"conv_1"}`, "conversation", "unsupported_parameter"},
		{"prompt template", `{"model":"m","input":"a","prompt":{"id":"pmpt_1"}}`, "prompt", "unsupported_parameter"},
		{"truncation auto", `{"model":"m","input":"a","truncation":"auto"}`, "truncation", "unsupported_parameter"},
		{"compaction", `{"model":"m","input":"a","context_management":[{"type":"compaction"}]}`, "context_management", "unsupported_parameter"},
		{"previous_response_id empty", `{"model":"m","input":"a","previous_response_id":""}`, "previous_response_id", "invalid_value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newX(testTranslator(), []byte(tt.body), nil)
			var e *providers.Error
			if !errors.As(err, &e) {
				t.Fatalf("New error = %v, want a *providers.Error", err)
			}
			if e.Status != 400 || e.Type != "invalid_request_error" || e.Param != tt.param || e.Code != tt.code {
				t.Errorf("error = %d %s param %q code %q (%s), want 400 invalid_request_error param %q code %q",
					e.Status, e.Type, e.Param, e.Code, e.Message, tt.param, tt.code)
			}
			if e.Message == "" {
				t.Error("the error has no message")
			}
			// Validate refuses the same body (but for what needs the
			// conversation: an unresolvable item_reference).
			newOnly := map[string]bool{"empty input": true, "only reasoning": true, "unknown reference": true, "only a search's record": true}
			if _, verr := Validate([]byte(tt.body)); (verr == nil) != newOnly[tt.name] {
				t.Errorf("Validate error = %v; want one only when New alone can tell", verr)
			}
		})
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":"v"`, i)
	}
	return b.String()
}

// TestStoredHistoryErrors checks that a stored conversation the gateway
// cannot read is a server error, not the client's.
func TestStoredHistoryErrors(t *testing.T) {
	body := []byte(`{"model":"m","previous_response_id":"resp_1","input":"more"}`)
	for _, history := range []string{`{`, `{"a":1}`, `[{"type":"message","role":"robot","content":"x"}]`} {
		_, err := newX(testTranslator(), body, []byte(history))
		var e *providers.Error
		if !errors.As(err, &e) || e.Status != 500 || e.Param != "previous_response_id" {
			t.Errorf("history %s: error %v, want a 500 about previous_response_id", history, err)
		}
	}
}

// TestItemReference: a reference names an item earlier in the input (or
// in the conversation) and stands for it; a reference to a reference is
// refused.
func TestItemReference(t *testing.T) {
	x, err := newX(testTranslator(), []byte(`{"model":"m","input":[{"id":"msg_a","role":"user","content":"again"},{"type":"item_reference","id":"msg_a"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"role":"user","content":"again"},{"role":"user","content":"again"}]`
	if got := gjson.GetBytes(x.ChatBody(), "messages").Raw; got != want {
		t.Errorf("messages %s, want %s", got, want)
	}
	_, err = newX(testTranslator(), []byte(`{"model":"m","previous_response_id":"r","input":[{"type":"item_reference","id":"ref_1"}]}`),
		[]byte(`[{"role":"user","content":"x"},{"type":"item_reference","id":"ref_1"}]`))
	var e *providers.Error
	if !errors.As(err, &e) || e.Status/100 != 4 && e.Status != 500 {
		t.Errorf("a reference to a reference: %v", err)
	}
}
