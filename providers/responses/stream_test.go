package responses

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
	"github.com/modelgate/modelgate/providers/sse"
)

// readTranscript splits testdata/sse/responses/<name>.txt into the
// CreateResponse body, the hub's stream and the expected Responses stream,
// divided by translatortest.Separator lines.
func readTranscript(t testing.TB, path string) (request, hub, want []byte) {
	t.Helper()
	data := translatortest.ReadFile(t, path)
	sep := []byte("\n" + translatortest.Separator + "\n")
	i := bytes.Index(data, sep)
	j := bytes.Index(data[i+1:], sep)
	if i < 0 || j < 0 {
		t.Fatalf("%s: want three parts divided by %q lines", path, translatortest.Separator)
	}
	j += i + 1
	// The hub stream keeps its last line break: it ends with a blank line.
	return data[:i], data[i+len(sep) : j+1], data[j+len(sep):]
}

// transcripts lists the stream transcripts.
func transcripts(t testing.TB) []string { return translatortest.Transcripts(t, sseDir, ".txt") }

// translateStream feeds the hub stream to the exchange's Stream in pieces
// of random sizes (rng nil: all at once), framing events with sse.Cut as
// the gateway does, and returns the Responses stream.
func translateStream(x *Exchange, hub []byte, rng *rand.Rand) []byte {
	out, _ := providerkit.Translate(x.Stream(), nil, hub, rng) // Stream.Event never fails
	return out
}

func newExchange(t testing.TB, request []byte) *Exchange {
	t.Helper()
	x, err := newX(testTranslator(), request, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return x
}

// TestStreamTranscripts translates each transcript's hub stream and
// compares the result with the expected Responses stream, which every
// event of must decode with openai-go's event union and follow the rules
// of checkEvents; random chunking of the hub stream changes nothing.
func TestStreamTranscripts(t *testing.T) {
	for _, path := range transcripts(t) {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			request, hub, want := readTranscript(t, path)
			x := newExchange(t, request)
			st := x.Stream()
			got, _ := providerkit.Translate(st, nil, hub, nil)
			// The usage the stream reports is what its terminal event
			// carries, as a relay of the same events reads it.
			if u, carried := st.Usage(), eventsUsage(got); u != carried {
				t.Errorf("the stream reports the usage %+v; its events carry %+v", u, carried)
			}
			if translatortest.Update() {
				sep := translatortest.Separator + "\n"
				data := append(append(append(append(request, "\n"+sep...), hub...), sep...), got...)
				translatortest.WriteFile(t, path, data)
				return
			}
			checkEvents(t, got)
			if !bytes.Equal(got, want) {
				t.Fatalf("Responses stream differs\ngot:\n%s\nwant:\n%s", got, want)
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(hub))))
			for range 30 {
				if got := translateStream(newExchange(t, request), hub, rng); !bytes.Equal(got, want) {
					t.Fatalf("random chunking changed the output:\n%s", got)
				}
			}
		})
	}
}

// eventsUsage is the usage a Responses stream's events carry, as its
// relay reads them.
func eventsUsage(stream []byte) providers.Used {
	r := NewRelay(nil)
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

// TestStreamSDK reads each translated stream with openai-go's own stream
// machinery (ssestream, as client.Responses.NewStreaming does) and its
// ResponseAccumulator, and checks that the accumulator's reconstructed
// response holds what the terminal event's response holds.
func TestStreamSDK(t *testing.T) {
	for _, path := range transcripts(t) {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			request, hub, _ := readTranscript(t, path)
			out := translateStream(newExchange(t, request), hub, nil)
			res := &http.Response{
				StatusCode: 200,
				Header:     http.Header{"Content-Type": {"text/event-stream"}},
				Body:       io.NopCloser(bytes.NewReader(out)),
			}
			stream := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(res), nil)
			var acc responses.ResponseAccumulator
			var last responses.ResponseStreamEventUnion
			n := 0
			for stream.Next() {
				ev := stream.Current()
				var server responses.ResponsesServerEventUnion
				if err := json.Unmarshal([]byte(ev.RawJSON()), &server); err != nil {
					t.Fatalf("event %d: %v", n, err)
				}
				if err := acc.AddEvent(server); err != nil {
					t.Fatalf("event %d (%s): the accumulator refused it: %v", n, ev.Type, err)
				}
				last = ev
				n++
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("the SDK's stream failed after %d events: %v", n, err)
			}
			if n != len(splitEvents(t, out)) {
				t.Fatalf("the SDK read %d events of %d", n, len(splitEvents(t, out)))
			}
			snap := acc.Snapshot()
			if snap.TerminalEvent != last.Type {
				t.Fatalf("accumulator terminal %q, last event %q", snap.TerminalEvent, last.Type)
			}
			rebuilt, err := acc.ReconstructedResponse()
			if err != nil {
				t.Fatal(err)
			}
			final := last.Response
			if rebuilt.ID != final.ID || rebuilt.Status != final.Status || rebuilt.OutputText() != final.OutputText() {
				t.Errorf("reconstructed %s %s %q, terminal %s %s %q", rebuilt.ID, rebuilt.Status, rebuilt.OutputText(), final.ID, final.Status, final.OutputText())
			}
			if got, want := snap.OutputText(), final.OutputText(); got != want {
				t.Errorf("accumulated text %q, terminal text %q", got, want)
			}
			// Every item the deltas built equals the item in the terminal
			// response (arguments, custom input, text).
			for _, o := range snap.Output {
				if int(o.OutputIndex) >= len(final.Output) {
					t.Fatalf("accumulated item %d is not in the terminal output", o.OutputIndex)
				}
				item := final.Output[o.OutputIndex]
				switch o.Type {
				case "function_call":
					if o.Arguments != item.Arguments.OfString || o.CallID != item.CallID || o.Name != item.Name {
						t.Errorf("item %d: accumulated %q %q(%q), terminal %q %q(%q)", o.OutputIndex, o.CallID, o.Name, o.Arguments, item.CallID, item.Name, item.Arguments.OfString)
					}
				case "custom_tool_call":
					if o.Input != item.Input || o.CallID != item.CallID || o.Name != item.Name {
						t.Errorf("item %d: accumulated %q %q(%q), terminal %q %q(%q)", o.OutputIndex, o.CallID, o.Name, o.Input, item.CallID, item.Name, item.Input)
					}
				}
			}
		})
	}
}

// TestStreamMatchesAnswer checks, for each transcript whose stream
// completes, that the streamed Response equals the Response translated
// from the same answer not streamed: the hub stream accumulated into a
// chat.completion with openai-go's ChatCompletionAccumulator (plus what the
// SDK does not know: reasoning_content, thinking_blocks, annotations and
// logprobs).
func TestStreamMatchesAnswer(t *testing.T) {
	pairs := 0
	for _, path := range transcripts(t) {
		request, hub, _ := readTranscript(t, path)
		out := translateStream(newExchange(t, request), hub, nil)
		events := splitEvents(t, out)
		last := events[len(events)-1]
		// Reasoning that comes after text makes items in an order that
		// one chat message cannot give.
		if last.name == "response.failed" || strings.Contains(path, "reasoning_after_text") {
			continue
		}
		pairs++
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			chat := accumulateHub(t, hub)
			whole, err := newExchange(t, request).Response(chat)
			if err != nil {
				t.Fatalf("Response: %v\n%s", err, chat)
			}
			streamed := []byte(gjson.GetBytes(last.data, "response").Raw)
			if !reflect.DeepEqual(translatortest.Canonical(t, "streamed", streamed), translatortest.Canonical(t, "whole", whole)) {
				t.Errorf("the streamed and the whole Response differ\nstreamed:\n%s\nwhole:\n%s", translatortest.Indent(t, streamed), translatortest.Indent(t, whole))
			}
		})
	}
	if pairs < 8 {
		t.Fatalf("only %d transcripts complete", pairs)
	}
}

// accumulateHub turns a hub stream into the chat.completion it streamed.
func accumulateHub(t *testing.T, hub []byte) []byte {
	t.Helper()
	var acc openai.ChatCompletionAccumulator
	var reasoning strings.Builder
	var blocks, annotations, logprobs []string
	var usage, model string
	for buf := hub; ; {
		event, rest, ok := sse.Cut(buf)
		if !ok {
			break
		}
		buf = rest
		_, data := sse.Fields(event)
		if len(data) == 0 || string(data) == "[DONE]" {
			continue
		}
		var chunk openai.ChatCompletionChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		if !acc.AddChunk(chunk) {
			t.Fatalf("the accumulator refused %s", data)
		}
		v := gjson.ParseBytes(data)
		if m := v.Get("model").Str; m != "" {
			model = m
		}
		if u := v.Get("usage"); u.IsObject() {
			usage = u.Raw
		}
		delta := v.Get("choices.0.delta")
		r := delta.Get("reasoning_content")
		if !r.Exists() {
			r = delta.Get("reasoning")
		}
		reasoning.WriteString(r.Str)
		for _, b := range delta.Get("thinking_blocks").Array() {
			blocks = append(blocks, b.Raw)
		}
		for _, a := range delta.Get("annotations").Array() {
			annotations = append(annotations, a.Raw)
		}
		for _, lp := range v.Get("choices.0.logprobs.content").Array() {
			logprobs = append(logprobs, lp.Raw)
		}
	}
	b := []byte(`{"id":"x","object":"chat.completion","created":1,"model":`)
	b, _ = appendJSON(b, model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant"`...)
	cc := acc.ChatCompletion
	if len(cc.Choices) > 0 {
		c := cc.Choices[0]
		b = append(b, `,"content":`...)
		b, _ = appendJSON(b, c.Message.Content)
		if c.Message.Refusal != "" {
			b = append(b, `,"refusal":`...)
			b, _ = appendJSON(b, c.Message.Refusal)
		}
		if len(c.Message.ToolCalls) > 0 {
			b = append(b, `,"tool_calls":[`...)
			for i, tc := range c.Message.ToolCalls {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"id":`...)
				b, _ = appendJSON(b, tc.ID)
				b = append(b, `,"type":"function","function":{"name":`...)
				b, _ = appendJSON(b, tc.Function.Name)
				b = append(b, `,"arguments":`...)
				b, _ = appendJSON(b, tc.Function.Arguments)
				b = append(b, "}}"...)
			}
			b = append(b, ']')
		}
	}
	b = append(b, `,"reasoning_content":`...)
	b, _ = appendJSON(b, reasoning.String())
	b = append(b, `,"thinking_blocks":[`+strings.Join(blocks, ",")+`],"annotations":[`+strings.Join(annotations, ",")+`]}`...)
	b = append(b, `,"logprobs":{"content":[`+strings.Join(logprobs, ",")+`]},"finish_reason":`...)
	finish := ""
	if len(cc.Choices) > 0 {
		finish = cc.Choices[0].FinishReason
	}
	b, _ = appendJSON(b, finish)
	b = append(b, "}]"...)
	if usage != "" {
		b = append(b, `,"usage":`+usage...)
	}
	return append(b, '}')
}

func appendJSON(b []byte, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	return append(b, data...), err
}

// TestFail checks that an error the gateway meets ends the stream with
// response.failed carrying the code Codex tells apart, and that nothing
// follows a terminal event.
func TestFail(t *testing.T) {
	for _, tc := range []struct {
		e    providers.Error
		code string
	}{
		{providers.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "try again in 2s"}, "rate_limit_exceeded"},
		{providers.Error{Status: 429, Type: "rate_limit_error", Message: "slow down"}, "rate_limit_exceeded"},
		{providers.Error{Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Message: "too long"}, "context_length_exceeded"},
		{providers.Error{Status: 429, Type: "insufficient_quota", Message: "no credit"}, "insufficient_quota"},
		{providers.Error{Status: 502, Type: "server_error", Code: "stream_incomplete", Message: "cut"}, "server_error"},
		{providers.Error{Status: 500}, "server_error"},
	} {
		x := newExchange(t, []byte(`{"model":"m","input":"hi","stream":true}`))
		s := x.Stream()
		out, _ := s.Event(nil, []byte(`data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}`))
		out = s.Fail(out, &tc.e)
		out = s.Close(out)
		out, _ = s.Event(out, []byte(`data: {"choices":[{"index":0,"delta":{"content":" more"}}]}`))
		events, final := checkEvents(t, out)
		if events[len(events)-1].name != "response.failed" || string(final.Error.Code) != tc.code || final.Error.Message == "" {
			t.Errorf("%+v: %s %+v", tc.e, events[len(events)-1].name, final.Error)
		}
		if final.Output[0].Status != "incomplete" || final.OutputText() != "Hi" {
			t.Errorf("the open message in the failed response: %s %q", final.Output[0].Status, final.OutputText())
		}
	}
}

// TestStreamErrorFirst: an error before any chunk still makes a whole
// stream: created, in progress, failed.
func TestStreamErrorFirst(t *testing.T) {
	x := newExchange(t, []byte(`{"model":"req-model","input":"hi","stream":true}`))
	s := x.Stream()
	out, _ := s.Event(nil, []byte(`data: {"error":{"message":"overloaded","type":"server_error","param":null,"code":"overloaded"}}`))
	events, final := checkEvents(t, s.Close(out))
	if len(events) != 3 || final.Model != "req-model" || final.Error.Message != "overloaded" {
		t.Errorf("%d events, %s, %+v", len(events), final.Model, final.Error)
	}
	for _, bad := range []string{"data: {", "data: [1]", "data: \"x\""} {
		x := newExchange(t, []byte(`{"model":"m","input":"hi","stream":true}`))
		s := x.Stream()
		out, err := s.Event(nil, []byte(bad))
		if err != nil {
			t.Fatal(err)
		}
		if _, final := checkEvents(t, out); final.Status != "failed" {
			t.Errorf("%s: %s", bad, final.Status)
		}
	}
}
