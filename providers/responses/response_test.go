package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/jsonw"
	"github.com/tidwall/gjson"
)

// TestResponseGolden translates the hub answer of each <name>.in.json
// ({"request": CreateResponse, "chat": chat.completion}) into the Response
// <name>.response.json, which openai-go's responses.Response must decode
// with every required field.
func TestResponseGolden(t *testing.T) {
	translatortest.Golden(t, responseDir, ".in.json", ".response.json", func(t *testing.T, _ string, data []byte) []byte {
		in := gjson.ParseBytes(data)
		x, err := newX(testTranslator(), []byte(in.Get("request").Raw), nil)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		got, err := x.Response([]byte(in.Get("chat").Raw))
		if err != nil {
			t.Fatalf("Response: %v", err)
		}
		if used := x.Used(); used != AnswerUsage(got) {
			t.Errorf("Used() = %+v; the Response carries %+v", used, AnswerUsage(got))
		}
		r := decodeResponse(t, got)
		if r.ID != x.ID() || !strings.HasPrefix(r.ID, "resp_") {
			t.Errorf("id = %q, want the exchange's %q", r.ID, x.ID())
		}
		// encrypted_content only when include asks for it, and
		// always in the record.
		wantEnc := strings.Contains(in.Get("request.include").Raw, "reasoning.encrypted_content")
		if has := strings.Contains(string(got), `"encrypted_content"`); has != wantEnc && strings.Contains(string(x.final), `"encrypted_content"`) {
			t.Errorf("encrypted_content in the Response: %v, want %v", has, wantEnc)
		}
		if rec := x.Record(); (rec != nil) != x.Info().Store {
			t.Errorf("Record() = %s with store %v", rec, x.Info().Store)
		}
		return got
	})
}

func TestResponseNotACompletion(t *testing.T) {
	for _, body := range []string{``, `{`, `[]`, `{"choices":[]}`, `{"choices":[{"message":"hi"}]}`} {
		x, err := newX(testTranslator(), []byte(`{"model":"m","input":"hi"}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := x.Response([]byte(body)); err == nil {
			t.Errorf("Response(%q) = %s, want an error", body, out)
		}
		if x.Record() != nil {
			t.Errorf("Record after a failed translation is not nil")
		}
	}
}

// TestEncryptedRoundTrip checks that thinking blocks that go out as a
// reasoning item's encrypted_content come back, given that item, as the
// same thinking blocks on the assistant message of that turn.
func TestEncryptedRoundTrip(t *testing.T) {
	blocks := `[{"type":"thinking","thinking":"Step \"one\" ✓\n","signature":"EqQBCkYIARABGAIiQ"},{"type":"redacted_thinking","data":"EmwKAhgBEgy"}]`
	chat := `{"id":"c","object":"chat.completion","created":1,"model":"claude","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
		`"reasoning_content":"Step \"one\" ✓\n","thinking_blocks":` + blocks + `,"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	x, err := newX(testTranslator(), []byte(`{"model":"m","input":"go","include":["reasoning.encrypted_content"],"tools":[{"type":"function","name":"f"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := x.Response([]byte(chat))
	if err != nil {
		t.Fatal(err)
	}
	enc := gjson.GetBytes(resp, "output.0.encrypted_content").Str
	if !strings.HasPrefix(enc, encryptedPrefix) {
		t.Fatalf("encrypted_content = %q", enc)
	}
	// The client sends the output back as input, with the tool's output.
	input := `[{"role":"user","content":"go"},` + gjson.GetBytes(resp, "output.0").Raw + `,` + gjson.GetBytes(resp, "output.1").Raw +
		`,{"type":"function_call_output","call_id":"toolu_1","output":"ok"}]`
	y, err := newX(testTranslator(), []byte(`{"model":"m","input":`+input+`,"tools":[{"type":"function","name":"f"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := gjson.GetBytes(y.ChatBody(), "messages.1")
	if got := msg.Get("thinking_blocks").Raw; !jsonEqual(t, got, blocks) {
		t.Errorf("thinking_blocks = %s, want %s", got, blocks)
	}
	if got := msg.Get("reasoning_content").Str; got != "Step \"one\" ✓\n" {
		t.Errorf("reasoning_content = %q", got)
	}
	if got := msg.Get("tool_calls.0.id").Str; got != "toolu_1" {
		t.Errorf("tool call id = %q", got)
	}

	for _, bad := range []string{"mg1.", "mg1.!!!", "mg1.W10", "mg1.eyJhIjoxfQ", "mg1.W3sidHlwZSI6InRoaW5raW5nIn1d", "gAAAAB"} {
		var blocks jsonw.List
		if decodeEncrypted(bad, &blocks) || blocks.Len() != 0 {
			t.Errorf("decodeEncrypted(%q) accepted it", bad)
		}
	}
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
