package responses

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
)

// FuzzRequest checks that every body either translates into a hub request
// that the hub's validation accepts, or fails with a *providers.Error; and
// that Validate and New agree.
func FuzzRequest(f *testing.F) {
	for _, name := range translatortest.GoldenCases(f, requestDir, ".responses.json") {
		f.Add(translatortest.ReadFile(f, filepath.Join(requestDir, name+".responses.json")), translatortest.ReadOptional(f, filepath.Join(requestDir, name+".history.json")))
	}
	f.Add([]byte(`{"model":"m","input":[{"type":"item_reference","id":"a"},{"type":"reasoning","id":"a","summary":[]}]}`), []byte(nil))
	f.Add([]byte(`{"model":"m","previous_response_id":"r","input":[{"type":"item_reference","id":"x"}]}`), []byte(`[{"id":"x","type":"item_reference"}]`))

	f.Fuzz(func(t *testing.T, body, history []byte) {
		_, verr := Validate(body)
		x, err := newX(testTranslator(), body, history)
		if err != nil {
			var e *providers.Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status >= 600 || !json.Valid(e.JSON()) {
				t.Fatalf("New error %v is not a *providers.Error", err)
			}
			return
		}
		if verr != nil {
			t.Fatalf("Validate refused what New accepted: %v", verr)
		}
		if _, err := providers.ValidateChat(x.ChatBody()); err != nil {
			t.Fatalf("the hub request fails ValidateChat: %v\n%s\nfrom %s", err, x.ChatBody(), body)
		}
	})
}

// fuzzRequests are the requests the answer and stream fuzzers translate
// for: plain, and one with tools (a custom one), logprobs, encrypted
// reasoning and a stored input.
var fuzzRequests = []string{
	`{"model":"m","input":"hi","stream":true}`,
	`{"model":"m","input":[{"role":"user","content":"hi"}],"stream":true,"include":["reasoning.encrypted_content","message.output_text.logprobs"],` +
		`"tools":[{"type":"function","name":"f"},{"type":"custom","name":"apply_patch"}]}`,
}

// FuzzResponse checks that any answer either translates into a Response
// that openai-go decodes with every required field, or fails.
func FuzzResponse(f *testing.F) {
	for _, name := range translatortest.GoldenCases(f, responseDir, ".in.json") {
		f.Add([]byte(gjson.GetBytes(translatortest.ReadFile(f, filepath.Join(responseDir, name+".in.json")), "chat").Raw), true)
	}
	f.Fuzz(func(t *testing.T, chat []byte, tools bool) {
		req := fuzzRequests[0]
		if tools {
			req = fuzzRequests[1]
		}
		x := newExchange(t, []byte(req))
		out, err := x.Response(chat)
		if providerkit.CheckFuzzedBody(t, chat, out, err); err != nil {
			return
		}
		decodeResponse(t, out)
		if rec := x.Record(); !json.Valid(rec) {
			t.Fatalf("invalid record %s", rec)
		}
	})
}

// FuzzStream feeds arbitrary bytes, framed by sse.Cut, through a stream
// translator and checks that what comes out is a well-formed Responses
// stream whatever the hub sent: checkFraming, which is cheap enough for
// the fuzzer (TestStreamTranscripts holds the transcripts to the full
// checkEvents, openai-go's types included).
func FuzzStream(f *testing.F) {
	for _, path := range transcripts(f) {
		_, hub, _ := readTranscript(f, path)
		f.Add(hub, true)
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"{\\\"input\\\":\\\"\\\\ud83d\"}}]}}]}\n\n"), true)
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"thinking_blocks\":[{\"type\":\"thinking\"}],\"annotations\":[{\"type\":\"url_citation\"}]}}]}\n\ndata: [DONE]\n\n"), false)
	f.Fuzz(func(t *testing.T, hub []byte, tools bool) {
		req := fuzzRequests[0]
		if tools {
			req = fuzzRequests[1]
		}
		x := newExchange(t, []byte(req))
		out := translateStream(x, hub, nil)
		checkFraming(t, out)
		if !json.Valid(x.Record()) {
			t.Fatalf("invalid record %s", x.Record())
		}
	})
}

// checkFraming checks a Responses stream's framing: every event an event:
// line and a data: line of a JSON object whose type the event: line names,
// sequence numbers counting from 0, response.created first and one
// terminal event, last.
func checkFraming(t *testing.T, out []byte) {
	t.Helper()
	events := splitEvents(t, out)
	if len(events) < 3 || events[0].name != "response.created" {
		t.Fatalf("the stream does not start with response.created:\n%s", out)
	}
	for i, ev := range events {
		v := gjson.ParseBytes(ev.data)
		if !json.Valid(ev.data) || !v.IsObject() || v.Get("type").Str != ev.name || v.Get("sequence_number").Int() != int64(i) {
			t.Fatalf("event %d is malformed:\n%s", i, ev.data)
		}
		if ev.name == "error" && v.Get("code").Str == "internal_error" {
			t.Fatalf("event %d: the translator misused the JSON writer:\n%s", i, ev.data)
		}
		terminal := ev.name == "response.completed" || ev.name == "response.incomplete" || ev.name == "response.failed"
		if terminal != (i == len(events)-1) {
			t.Fatalf("event %d (%s) of %d", i, ev.name, len(events))
		}
	}
}
