package responses

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/jsonw"
	"github.com/modelgate/modelgate/providers/sse"
)

// TestThroughAnthropic runs the Anthropic translator's recorded streams
// (testdata/sse/anthropic) through it and then through this package, as
// the gateway chains them for a Responses client of an Anthropic model:
// every Responses stream is well formed (checkEvents), thinking comes out
// as reasoning items whose encrypted_content holds the signed blocks, and
// sending those items back gives the Anthropic translator the same
// thinking blocks, signatures and all.
func TestThroughAnthropic(t *testing.T) {
	files := translatortest.Transcripts(t, "../../testdata/sse/anthropic", ".txt")
	body := `{"model":"claude","input":"hi","stream":true,"include":["reasoning.encrypted_content"],` +
		`"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}},{"type":"function","name":"get_time","parameters":{"type":"object"}}]}`
	thinking := 0
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			upstream, _, _ := translatortest.ReadTranscript(t, path)

			// Anthropic's stream → hub chunks → Responses events.
			x := newExchange(t, []byte(body))
			hub := anthropic.Chat{}.ChatStream(providers.StreamOptions{IncludeUsage: true})
			s := x.Stream()
			var chunks, out []byte
			for buf := upstream; ; {
				event, rest, ok := sse.Cut(buf)
				if !ok {
					break
				}
				buf = rest
				var err error
				if chunks, err = hub.Event(chunks[:0], event); err != nil {
					out = s.Fail(out, &providers.Error{Type: "server_error", Message: err.Error()})
					break
				}
				out = s.Events(out, chunks)
			}
			out = s.Events(out, hub.Close(nil))
			out = s.Close(out)
			events, final := checkEvents(t, out)

			for _, it := range final.Output {
				if it.Type != "reasoning" || it.EncryptedContent == "" {
					continue
				}
				thinking++
				var blocks jsonw.List
				if !decodeEncrypted(it.EncryptedContent, &blocks) {
					t.Fatalf("encrypted_content %q does not decode", it.EncryptedContent)
				}
				w := jsonw.New(nil)
				a := w.Array()
				a.List(&blocks)
				a.End()
				list, err := w.Finish()
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range gjson.ParseBytes(list).Array() {
					if b.Get("type").Str == "thinking" && b.Get("signature").Str == "" {
						t.Errorf("a thinking block without its signature: %s", b.Raw)
					}
				}
				// The client sends the output back; Anthropic gets the
				// same blocks.
				input := `[{"role":"user","content":"hi"}`
				for _, raw := range gjson.GetBytes(events[len(events)-1].data, "response.output").Array() {
					input += "," + raw.Raw
				}
				for _, o := range final.Output {
					if o.Type == "function_call" {
						input += `,{"type":"function_call_output","call_id":"` + o.CallID + `","output":"ok"}`
					}
				}
				input += "]"
				y := newExchange(t, []byte(`{"model":"claude","input":`+input+`,"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}},{"type":"function","name":"get_time","parameters":{"type":"object"}}]}`))
				if _, err := providers.ValidateChat(y.ChatBody()); err != nil {
					t.Fatal(err)
				}
				req, err := anthropic.Chat{}.ChatRequest(y.ChatBody(), "claude-sonnet-4-5")
				if err != nil {
					t.Fatalf("the Anthropic translator refuses the replayed turn: %v\n%s", err, y.ChatBody())
				}
				sent := gjson.GetBytes(req.Body, `messages.1.content`)
				var got []string
				sent.ForEach(func(_, b gjson.Result) bool {
					if typ := b.Get("type").Str; typ == "thinking" || typ == "redacted_thinking" {
						got = append(got, b.Raw)
					}
					return true
				})
				want := gjson.ParseBytes(list).Array()
				if len(got) != len(want) {
					t.Fatalf("Anthropic gets %d thinking blocks back, the stream had %d:\n%s", len(got), len(want), req.Body)
				}
				for k := range want {
					if !jsonEqual(t, got[k], want[k].Raw) {
						t.Errorf("block %d: sent %s, streamed %s", k, got[k], want[k].Raw)
					}
				}
			}
		})
	}
	if thinking == 0 {
		t.Error("no transcript had thinking to carry")
	}
}
