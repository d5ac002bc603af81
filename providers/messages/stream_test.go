package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
	"github.com/modelgate/modelgate/providers/sse"
)

// readTranscript splits testdata/sse/messages/<name>.txt into the hub
// stream and the Messages stream wanted of it.
func readTranscript(t testing.TB, path string) (hub, want []byte) {
	t.Helper()
	hub, want, _ = translatortest.ReadTranscript(t, path)
	return hub, want
}

// translate feeds the hub stream to tr in pieces of random sizes (rng
// nil: all at once), framing events with sse.Cut as the gateway does, and
// returns the Messages stream.
func translate(tr providers.StreamTranslator, hub []byte, rng *rand.Rand) []byte {
	out, err := providerkit.Translate(tr, nil, hub, rng)
	if err != nil {
		panic(fmt.Sprintf("Event returned an error: %v", err))
	}
	return out
}

// accumulate decodes a Messages stream with anthropic-sdk-go's SSE decoder
// and stream, as a client reads it, and rebuilds the message with
// Message.Accumulate. err is the stream's error (an error event).
func accumulate(t testing.TB, stream []byte) (anthropic.Message, int, error) {
	t.Helper()
	res := &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(stream)),
		// With a request, the SDK turns an error event into *anthropic.Error.
		Request: &http.Request{Method: http.MethodPost, URL: &url.URL{Scheme: "http", Host: "gateway", Path: "/v1/messages"}},
	}
	s := ssestream.NewStream[anthropic.MessageStreamEventUnion](ssestream.NewDecoder(res), nil)
	var m anthropic.Message
	events := 0
	for s.Next() {
		events++
		if err := m.Accumulate(s.Current()); err != nil {
			t.Fatalf("Accumulate: %v\n%s", err, stream)
		}
	}
	return m, events, s.Err()
}

// checkMessagesStream checks the event grammar Anthropic's streams follow
// (G.2), returning "" or what is wrong: every event named and typed alike;
// message_start first; blocks started at consecutive indices, each
// stopped before the next starts; deltas to the open block and of its
// kind; message_delta then message_stop at the end, or an error event.
func checkMessagesStream(stream []byte) string { return checkStream(stream, false) }

// checkStream is checkMessagesStream; with lateArgs it also allows what
// arbitrary hub input may cause: arguments for a tool call whose block
// was closed when another opened (the SDK accumulates deltas to any
// started block).
func checkStream(stream []byte, lateArgs bool) string {
	tools := map[int64]bool{}
	started, ended := false, false
	next, open := int64(0), int64(-1)
	openType := ""
	rest := stream
	for len(rest) > 0 {
		ev, r, ok := sse.Cut(rest)
		if !ok {
			return fmt.Sprintf("incomplete event at the end: %q", rest)
		}
		rest = r
		name, data := sse.Fields(ev)
		if !json.Valid(data) {
			return fmt.Sprintf("data is not JSON: %q", data)
		}
		v := gjson.ParseBytes(data)
		typ := v.Get("type").Str
		if string(name) != typ {
			return fmt.Sprintf("event %q carries type %q", name, typ)
		}
		if ended {
			return fmt.Sprintf("event %s after the end", typ)
		}
		if !started && typ != "message_start" && typ != "error" {
			return fmt.Sprintf("%s before message_start", typ)
		}
		switch typ {
		case "message_start":
			if started {
				return "a second message_start"
			}
			started = true
			if v.Get("message.type").Str != "message" || !v.Get("message.usage.input_tokens").Exists() {
				return "message_start without a message and usage"
			}
		case "ping":
		case "content_block_start":
			if open >= 0 {
				return fmt.Sprintf("block %d starts while %d is open", next, open)
			}
			if v.Get("index").Int() != next {
				return fmt.Sprintf("block index %d, want %d", v.Get("index").Int(), next)
			}
			open, openType = next, v.Get("content_block.type").Str
			tools[next] = openType == "tool_use"
			next++
		case "content_block_delta":
			if lateArgs && v.Get("index").Int() != open && tools[v.Get("index").Int()] && v.Get("delta.type").Str == "input_json_delta" {
				continue
			}
			if v.Get("index").Int() != open {
				return fmt.Sprintf("delta to block %d while %d is open", v.Get("index").Int(), open)
			}
			want := map[string]string{"text_delta": "text", "input_json_delta": "tool_use",
				"thinking_delta": "thinking", "signature_delta": "thinking"}[v.Get("delta.type").Str]
			if want != openType {
				return fmt.Sprintf("%s in a %s block", v.Get("delta.type").Str, openType)
			}
		case "content_block_stop":
			if v.Get("index").Int() != open {
				return fmt.Sprintf("stop of block %d while %d is open", v.Get("index").Int(), open)
			}
			open = -1
		case "message_delta":
			if open >= 0 {
				return "message_delta with a block open"
			}
			if !v.Get("delta.stop_reason").Exists() || !v.Get("usage.output_tokens").Exists() {
				return "message_delta without stop_reason and usage"
			}
		case "message_stop":
			ended = true
		case "error":
			if v.Get("error.type").Str == "" || v.Get("error.message").Str == "" {
				return "error event without type and message"
			}
			ended = true
		default:
			return fmt.Sprintf("unknown event %q", typ)
		}
	}
	if !ended {
		return "the stream neither stops nor fails"
	}
	return ""
}

func TestStreamTranscripts(t *testing.T) {
	for _, path := range translatortest.Transcripts(t, sseDir, ".txt") {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			hub, want := readTranscript(t, path)
			st := NewStream("")
			got := generated(translate(st, hub, nil))
			// The usage the stream reports is what its events carry, as a
			// relay of the same events reads it.
			if u, carried := st.Usage(), eventsUsage(got); u != carried {
				t.Errorf("the stream reports the usage %+v; its events carry %+v", u, carried)
			}
			if translatortest.Update() {
				data := append(append(hub, translatortest.Separator+"\n"...), got...)
				translatortest.WriteFile(t, path, data)
				return
			}
			if msg := checkMessagesStream(got); msg != "" {
				t.Errorf("%s\n%s", msg, got)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Messages stream differs\ngot:\n%s\nwant:\n%s", got, want)
			}
			// Framing must not matter: random chunk sizes and every line
			// ending SSE allows.
			rng := rand.New(rand.NewPCG(1, uint64(len(hub))))
			for range 30 {
				if got := generated(translate(NewStream(""), hub, rng)); !bytes.Equal(got, want) {
					t.Fatalf("random chunking changed the output:\n%s", got)
				}
			}
			for _, nl := range []string{"\r\n", "\r"} {
				in := bytes.ReplaceAll(hub, []byte("\n"), []byte(nl))
				if got := generated(translate(NewStream(""), in, rng)); !bytes.Equal(got, want) {
					t.Fatalf("line ending %q changed the output:\n%s", nl, got)
				}
			}
		})
	}
}

// eventsUsage is the usage a Messages stream's events carry, as its relay
// reads them.
func eventsUsage(stream []byte) providers.Used {
	r := NewRelay()
	for rest := stream; ; {
		ev, next, ok := sse.Cut(rest)
		if !ok {
			break
		}
		_, _ = r.Event(nil, ev)
		rest = next
	}
	return r.Usage()
}

// TestStreamEqualsAnswer rebuilds each translated stream with the SDK's
// accumulator and compares it with the translation of the same answer not
// streamed: content blocks (text, thinking with signatures, redacted
// thinking, tool_use ids, names and inputs), stop reason and sequence, and
// usage.
func TestStreamEqualsAnswer(t *testing.T) {
	for _, name := range translatortest.GoldenCases(t, responseDir, ".chat.json") {
		path := filepath.Join(sseDir, name+".txt")
		if _, err := os.Stat(path); err != nil {
			continue // an answer without a stream
		}
		t.Run(name, func(t *testing.T) {
			hub, _ := readTranscript(t, path)
			streamed, events, err := accumulate(t, translate(NewStream(""), hub, nil))
			if err != nil {
				t.Fatalf("the SDK's stream failed: %v", err)
			}
			if events < 3 {
				t.Fatalf("only %d events", events)
			}
			answer, err := FromChat(translatortest.ReadFile(t, filepath.Join(responseDir, name+".chat.json")))
			if err != nil {
				t.Fatal(err)
			}
			want := decodeMessage(t, answer)
			if d := diffMessages(streamed, want); d != "" {
				t.Errorf("the accumulated stream differs from the answer: %s", d)
			}
		})
	}
}

// diffMessages compares what a client reads of two messages.
func diffMessages(got, want anthropic.Message) string {
	if got.ID != want.ID || got.Model != want.Model || got.Role != want.Role {
		return fmt.Sprintf("id/model/role %q %q %q, want %q %q %q", got.ID, got.Model, got.Role, want.ID, want.Model, want.Role)
	}
	if got.StopReason != want.StopReason || got.StopSequence != want.StopSequence {
		return fmt.Sprintf("stop %q %q, want %q %q", got.StopReason, got.StopSequence, want.StopReason, want.StopSequence)
	}
	gu, wu := got.Usage, want.Usage
	if gu.InputTokens != wu.InputTokens || gu.OutputTokens != wu.OutputTokens ||
		gu.CacheReadInputTokens != wu.CacheReadInputTokens || gu.CacheCreationInputTokens != wu.CacheCreationInputTokens ||
		gu.OutputTokensDetails.ThinkingTokens != wu.OutputTokensDetails.ThinkingTokens {
		return fmt.Sprintf("usage %+v, want %+v", gu, wu)
	}
	if len(got.Content) != len(want.Content) {
		return fmt.Sprintf("%d blocks, want %d", len(got.Content), len(want.Content))
	}
	for i := range got.Content {
		g, w := got.Content[i], want.Content[i]
		if g.Type != w.Type || g.Text != w.Text || g.Thinking != w.Thinking || g.Signature != w.Signature ||
			g.Data != w.Data || g.ID != w.ID || g.Name != w.Name {
			return fmt.Sprintf("block %d: %s, want %s", i, g.RawJSON(), w.RawJSON())
		}
		if g.Type == "tool_use" {
			var gi, wi any
			if json.Unmarshal(g.Input, &gi) != nil || json.Unmarshal(w.Input, &wi) != nil || !reflect.DeepEqual(gi, wi) {
				return fmt.Sprintf("block %d input %s, want %s", i, g.Input, w.Input)
			}
		}
	}
	return ""
}

// TestStreamErrors checks the transcripts that end in an error: the SDK
// raises an API error of the mapped type, after the content that came.
func TestStreamErrors(t *testing.T) {
	tests := []struct {
		name, typ, text string
	}{
		{"error_midstream", "rate_limit_error", "Partial"},
		{"cut_off", "api_error", "Partial answer"},
		{"overloaded_event", "overloaded_error", ""},
		{"not_json", "api_error", "A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hub, _ := readTranscript(t, filepath.Join(sseDir, tt.name+".txt"))
			m, _, err := accumulate(t, translate(NewStream(""), hub, nil))
			var apiErr *anthropic.Error
			if err == nil || !asAPIError(err, &apiErr) {
				t.Fatalf("the stream ended with %v, want an API error", err)
			}
			if got := gjson.Get(apiErr.RawJSON(), "error.type").Str; got != tt.typ {
				t.Errorf("error type %q, want %q (%s)", got, tt.typ, apiErr.RawJSON())
			}
			text := ""
			for _, b := range m.Content {
				text += b.Text
			}
			if text != tt.text {
				t.Errorf("text before the error %q, want %q", text, tt.text)
			}
		})
	}
}

// TestStreamCloseAfterFinish: a stream that has its finish_reason but
// lost data: [DONE] still ends as a complete message.
func TestStreamCloseAfterFinish(t *testing.T) {
	hub, _ := readTranscript(t, filepath.Join(sseDir, "finish_without_done.txt"))
	m, _, err := accumulate(t, translate(NewStream(""), hub, nil))
	if err != nil {
		t.Fatal(err)
	}
	if m.StopReason != "end_turn" || len(m.Content) != 1 || m.Content[0].Text != "Hi" || m.Usage.InputTokens != 5 || m.Usage.OutputTokens != 1 {
		t.Errorf("message %s", m.RawJSON())
	}
}

// TestWrap checks the composition with a provider's stream translator:
// the provider's events go through it, then through the Messages
// translation; a provider translator's error becomes an Anthropic error
// event, and its Close (a cut-off stream) an error event too.
func TestWrap(t *testing.T) {
	hub, want := readTranscript(t, filepath.Join(sseDir, "tools_parallel.txt"))
	if got := translate(Wrap(identity{}, ""), hub, nil); !bytes.Equal(got, want) {
		t.Errorf("through an identity provider translator:\n%s\nwant:\n%s", got, want)
	}
	if got := translate(Wrap(nil, ""), hub, nil); !bytes.Equal(got, want) {
		t.Errorf("without a provider translator:\n%s", got)
	}

	got := translate(Wrap(failing{}, ""), hub, nil)
	if msg := checkMessagesStream(got); msg != "" {
		t.Errorf("%s\n%s", msg, got)
	}
	if !bytes.Contains(got, []byte("event: error\n")) || !bytes.HasSuffix(got, []byte("}}\n\n")) {
		t.Errorf("a failing provider translator gave:\n%s", got)
	}

	cut := translate(Wrap(cutting{}, "routed-model"), []byte("data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"), nil)
	if msg := checkMessagesStream(cut); msg != "" || !bytes.Contains(cut, []byte(`"type":"overloaded_error"`)) {
		t.Errorf("a provider translator's closing error gave (%s):\n%s", msg, cut)
	}
	// Chunks that name no model (Bedrock's) get the routed one.
	if !bytes.Contains(cut, []byte(`"model":"routed-model"`)) {
		t.Errorf("the routed model is not in message_start:\n%s", cut)
	}
	named := translate(Wrap(nil, "routed-model"), hub, nil)
	if !bytes.Contains(named, []byte(`"model":"gpt-5.1"`)) {
		t.Errorf("the hub's own model was replaced:\n%s", named)
	}
}

// identity is a provider translator whose events are hub chunks already.
type identity struct{}

func (identity) Event(dst, ev []byte) ([]byte, error) {
	return append(append(dst, ev...), "\n\n"...), nil
}
func (identity) Close(dst []byte) []byte { return dst }
func (identity) Usage() providers.Used   { return providers.Used{} }

// failing refuses every event.
type failing struct{}

func (failing) Event(dst, _ []byte) ([]byte, error) { return dst, fmt.Errorf("bad event") }
func (failing) Close(dst []byte) []byte             { return dst }
func (failing) Usage() providers.Used               { return providers.Used{} }

// cutting passes events and, at Close, reports an overloaded provider as
// the hub's translators end a cut-off stream.
type cutting struct{ identity }

func (cutting) Close(dst []byte) []byte {
	return append(dst, "data: {\"error\":{\"message\":\"Overloaded\",\"type\":\"server_error\",\"param\":null,\"code\":\"overloaded\"}}\n\n"...)
}

func asAPIError(err error, target **anthropic.Error) bool { return errors.As(err, target) }

var generatedID = regexp.MustCompile(`"(msg|toolu)_[0-9A-Za-z]{24}"`)

// generated replaces the ids the translation generates (for a hub stream
// without them) by a fixed one, so that transcripts can hold them.
func generated(stream []byte) []byte {
	return generatedID.ReplaceAll(stream, []byte(`"${1}_GENERATED"`))
}
