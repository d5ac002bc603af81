package bedrock

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
)

// Stream transcripts live in testdata/sse/bedrock as three files each:
//
//	<name>.json         the messages, readable: [{"headers": {…}, "payload": …}]
//	<name>.eventstream  the same messages as AWS event-stream bytes, written
//	                    by the SDK's Encoder under -update (and checked
//	                    against the .json source otherwise)
//	<name>.unified.txt  the unified stream the translator makes of them
//
// Transcripts whose name contains "include_usage" are translated with
// IncludeUsage. A transcript whose name (without "_include_usage") names a
// Converse answer in testdata/providers/bedrock/response is the streamed
// form of that answer.
const sseDir = "../../testdata/sse/bedrock"

// encodeSource encodes a transcript's readable source into event-stream
// bytes with aws-sdk-go-v2's Encoder. Header values are strings; a payload
// is written as compact JSON, or as the string "raw" gives, or left out
// when null.
func encodeSource(t testing.TB, src []byte) []byte {
	t.Helper()
	root := gjson.ParseBytes(src)
	if !root.IsArray() {
		t.Fatal("a transcript source is a JSON array of messages")
	}
	enc := eventstream.NewEncoder()
	var out bytes.Buffer
	root.ForEach(func(_, m gjson.Result) bool {
		var msg eventstream.Message
		m.Get("headers").ForEach(func(k, v gjson.Result) bool {
			msg.Headers = append(msg.Headers, eventstream.Header{Name: k.Str, Value: eventstream.StringValue(v.Str)})
			return true
		})
		switch p := m.Get("payload"); {
		case m.Get("raw").Exists():
			msg.Payload = []byte(m.Get("raw").Str)
		case p.Exists() && p.Type != gjson.Null:
			var buf bytes.Buffer
			if err := json.Compact(&buf, []byte(p.Raw)); err != nil {
				t.Fatal(err)
			}
			msg.Payload = buf.Bytes()
		}
		if err := enc.Encode(&out, msg); err != nil {
			t.Fatal(err)
		}
		return true
	})
	return out.Bytes()
}

// transcript is one stream transcript.
type transcript struct {
	name     string
	upstream []byte // event-stream bytes
	opts     providers.StreamOptions
}

// readTranscripts reads every transcript, checking that each .eventstream
// file is the encoding of its source (or rewriting it under -update).
func readTranscripts(t testing.TB) []transcript {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(sseDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in %s (%v)", sseDir, err)
	}
	var ts []transcript
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		src := translatortest.ReadFile(t, path)
		encoded := encodeSource(t, src)
		binPath := filepath.Join(sseDir, name+".eventstream")
		if translatortest.Update() {
			translatortest.WriteFile(t, binPath, encoded)
		}
		stored, err := os.ReadFile(binPath)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if !bytes.Equal(stored, encoded) {
			t.Fatalf("%s is not the encoding of %s.json: run with -update", binPath, name)
		}
		ts = append(ts, transcript{
			name:     name,
			upstream: stored,
			opts:     providers.StreamOptions{IncludeUsage: strings.Contains(name, "include_usage")},
		})
	}
	return ts
}

// testReplay replays streams through testChat's translator, cutting events
// with EventStream as the gateway does.
var testReplay = translatortest.Replay{New: testChat.ChatStream, Framing: EventStream}

// feed translates the whole events in buf and returns the bytes left.
func feed(tr providers.StreamTranslator, out, buf []byte) ([]byte, []byte, error) {
	return providerkit.Feed(tr, EventStream, out, buf)
}

func TestStreamTranscripts(t *testing.T) {
	for _, tr := range readTranscripts(t) {
		t.Run(tr.name, func(t *testing.T) {
			got, err := testReplay.Translate(tr.opts, tr.upstream, nil)
			if err != nil {
				t.Fatalf("translate: %v", err)
			}
			wantPath := filepath.Join(sseDir, tr.name+".unified.txt")
			if translatortest.Update() {
				translatortest.WriteFile(t, wantPath, got)
			}
			want, err := os.ReadFile(wantPath)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			providerkit.CheckUnifiedStream(t, got, tr.opts)
			if !bytes.Equal(got, want) {
				t.Fatalf("unified stream differs\ngot:\n%s\nwant:\n%s", got, want)
			}

			// How the bytes arrive must not matter: random pieces, and one
			// byte at a time, which cuts every message at every byte.
			rng := rand.New(rand.NewPCG(1, uint64(len(tr.upstream))))
			for range 30 {
				if got, err := testReplay.Translate(tr.opts, tr.upstream, rng); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("random pieces changed the output (err %v):\n%s", err, got)
				}
			}
			if got, err := translateBytewise(tr.opts, tr.upstream); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("one byte at a time changed the output (err %v):\n%s", err, got)
			}
			// Two writes, split at every byte of the first messages.
			for i := 1; i < min(len(tr.upstream), 400); i++ {
				got, err := translateSplit(tr.opts, tr.upstream, i)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("split at byte %d changed the output (err %v):\n%s", i, err, got)
				}
			}
		})
	}
}

// translateBytewise feeds upstream one byte at a time.
func translateBytewise(opts providers.StreamOptions, upstream []byte) ([]byte, error) {
	tr := testChat.ChatStream(opts)
	var out, buf []byte
	for _, c := range upstream {
		var err error
		if out, buf, err = feed(tr, out, append(buf, c)); err != nil {
			return out, err
		}
	}
	if len(buf) != 0 {
		return out, errors.New("bytes left over")
	}
	return tr.Close(out), nil
}

// translateSplit feeds upstream in two writes, split at byte i.
func translateSplit(opts providers.StreamOptions, upstream []byte, i int) ([]byte, error) {
	tr := testChat.ChatStream(opts)
	out, buf, err := feed(tr, nil, append([]byte(nil), upstream[:i]...))
	if err != nil {
		return out, err
	}
	out, buf, err = feed(tr, out, append(buf, upstream[i:]...))
	if err != nil {
		return out, err
	}
	if len(buf) != 0 {
		return out, errors.New("bytes left over")
	}
	return tr.Close(out), nil
}

// accumulated is what a client makes of an answer: the OpenAI SDK's view,
// and the reasoning fields the SDK does not know.
type accumulated struct {
	completion openai.ChatCompletion
	reasoning  string
	thinking   []any
}

// accumulateStream reads a unified stream as a client does, with the
// OpenAI SDK's ChatCompletionAccumulator.
func accumulateStream(t *testing.T, out []byte) accumulated {
	t.Helper()
	acc := providerkit.Accumulate(t, out)
	if !acc.Done {
		t.Fatalf("the stream did not end with [DONE]:\n%s", out)
	}
	a := accumulated{completion: acc.ChatCompletion, reasoning: acc.Reasoning[0]}
	for _, tb := range acc.ThinkingBlocks[0] {
		a.thinking = append(a.thinking, translatortest.Canonical(t, "thinking block", []byte(tb)))
	}
	return a
}

// readAnswer reads a unified chat.completion as a client does.
func readAnswer(t *testing.T, body []byte) accumulated {
	t.Helper()
	var a accumulated
	if err := json.Unmarshal(body, &a.completion); err != nil {
		t.Fatal(err)
	}
	msg := gjson.GetBytes(body, "choices.0.message")
	a.reasoning = msg.Get("reasoning_content").Str
	for _, tb := range msg.Get("thinking_blocks").Array() {
		a.thinking = append(a.thinking, translatortest.Canonical(t, "thinking block", []byte(tb.Raw)))
	}
	return a
}

// TestStreamMatchesAnswer checks, for every transcript that is the streamed
// form of a Converse answer, that the translated stream accumulated by the
// OpenAI SDK equals the translated answer: content, reasoning, every tool
// call's id, name and arguments, finish reason and usage.
func TestStreamMatchesAnswer(t *testing.T) {
	opts := providers.StreamOptions{IncludeUsage: true}
	pairs := 0
	for _, tr := range readTranscripts(t) {
		base := strings.TrimSuffix(tr.name, "_include_usage")
		body := translatortest.ReadOptional(t, filepath.Join(responseDir, base+".bedrock.json"))
		if body == nil {
			continue
		}
		pairs++
		t.Run(base, func(t *testing.T) {
			answer, _, err := testChat.ChatResponse(body)
			if err != nil {
				t.Fatal(err)
			}
			out, err := testReplay.Translate(opts, tr.upstream, nil)
			if err != nil {
				t.Fatal(err)
			}
			providerkit.StreamMatchesAnswer(t, out, answer, opts)
			a := providerkit.AnswerOf(t, answer)
			if a.Usage.Total == 0 {
				t.Errorf("the answer has no usage: %s", answer)
			}
			// Structured output is content a client parses.
			if content := a.Choices[0].Content; strings.HasPrefix(base, "json_") {
				var v map[string]any
				if err := json.Unmarshal([]byte(content), &v); err != nil || v["name"] != "Ann" {
					t.Errorf("structured content %q does not parse: %v", content, err)
				}
			}
		})
	}
	if pairs < 6 {
		t.Errorf("only %d transcripts pair with an answer", pairs)
	}
}

// encodeMessage encodes one message with the SDK's Encoder.
func encodeMessage(t testing.TB, headers map[string]string, payload string) []byte {
	t.Helper()
	var msg eventstream.Message
	for _, k := range []string{":event-type", ":exception-type", ":error-code", ":error-message", ":content-type", ":message-type"} {
		if v, ok := headers[k]; ok {
			msg.Headers = append(msg.Headers, eventstream.Header{Name: k, Value: eventstream.StringValue(v)})
		}
	}
	msg.Payload = []byte(payload)
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, msg); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rawEvent is an event message's bytes.
func rawEvent(t testing.TB, typ, payload string) []byte {
	return encodeMessage(t, map[string]string{":event-type": typ, ":content-type": "application/json", ":message-type": "event"}, payload)
}

// cut is the event EventStream cuts from one whole message.
func cut(t testing.TB, msg []byte) []byte {
	t.Helper()
	ev, rest, ok, err := EventStream.Cut(msg)
	if err != nil || !ok || len(rest) != 0 {
		t.Fatalf("Cut = %v, %v, %d bytes left", ok, err, len(rest))
	}
	return ev
}

// event is an event message as the translator gets it.
func event(t testing.TB, typ, payload string) []byte { return cut(t, rawEvent(t, typ, payload)) }

func TestCut(t *testing.T) {
	a := rawEvent(t, "messageStart", `{"role":"assistant"}`)
	b := rawEvent(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"hi"}}`)
	two := append(append([]byte(nil), a...), b...)

	// A message is cut only when all of it is there.
	for i := 0; i < len(a); i++ {
		ev, rest, ok, err := EventStream.Cut(a[:i])
		if ok || err != nil || ev != nil || !bytes.Equal(rest, a[:i]) {
			t.Fatalf("Cut of %d of %d bytes = %q, %v, %v", i, len(a), ev, ok, err)
		}
	}
	ev, rest, ok, err := EventStream.Cut(two)
	if !ok || err != nil || !bytes.Equal(rest, b) {
		t.Fatalf("Cut = %q, %q, %v, %v", ev, rest, ok, err)
	}
	if kind, name, payload, err := parseEvent(ev); err != nil || kind != kindEvent || name != "messageStart" || string(payload) != `{"role":"assistant"}` {
		t.Errorf("first event %c %q %q, %v", kind, name, payload, err)
	}
	if ev, rest, ok, err = EventStream.Cut(rest); !ok || err != nil || len(rest) != 0 {
		t.Fatalf("second Cut = %q, %q, %v, %v", ev, rest, ok, err)
	}
	if kind, name, payload, err := parseEvent(ev); err != nil || kind != kindEvent || name != "contentBlockDelta" ||
		string(payload) != `{"contentBlockIndex":0,"delta":{"text":"hi"}}` {
		t.Errorf("second event %c %q %q, %v", kind, name, payload, err)
	}

	// Every message kind keeps its type and payload.
	for _, tt := range []struct {
		headers       map[string]string
		payload       string
		kind          byte
		name, wantPay string
	}{
		{map[string]string{":message-type": "exception", ":exception-type": "throttlingException"}, `{"message":"m"}`, kindException, "throttlingException", `{"message":"m"}`},
		{map[string]string{":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom"}, "", kindError, "InternalFailure", "boom"},
		{map[string]string{":message-type": "future"}, "x", kindOther, "future", "x"},
		{map[string]string{":event-type": "messageStart"}, "{}", kindUntyped, "", "{}"},
		{map[string]string{":message-type": "event"}, "", kindEvent, "", ""},
	} {
		kind, name, payload, err := parseEvent(cut(t, encodeMessage(t, tt.headers, tt.payload)))
		if err != nil || kind != tt.kind || name != tt.name || string(payload) != tt.wantPay {
			t.Errorf("%v: %c %q %q, %v", tt.headers, kind, name, payload, err)
		}
	}
	for _, bad := range []string{"", "E", "E\x00", "E\x00\x05abc", "Z\x00\x00{}"} {
		if _, _, _, err := parseEvent([]byte(bad)); err == nil {
			t.Errorf("parseEvent(%q) accepted it", bad)
		}
	}
}

func TestCutCorrupt(t *testing.T) {
	good := rawEvent(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"hello"}}`)
	flip := func(i int) []byte {
		b := append([]byte(nil), good...)
		b[i] ^= 0x20
		return b
	}
	withLen := func(total, headers uint32) []byte {
		b := make([]byte, 12)
		binary.BigEndian.PutUint32(b, total)
		binary.BigEndian.PutUint32(b[4:], headers)
		binary.BigEndian.PutUint32(b[8:], crc32.ChecksumIEEE(b[:8]))
		return b
	}
	tests := map[string][]byte{
		"payload byte":     flip(len(good) - 10),
		"header byte":      flip(20),
		"message CRC":      flip(len(good) - 1),
		"prelude CRC":      flip(9),
		"total too small":  withLen(8, 0),
		"total too large":  withLen(MaxMessageLen+1, 0),
		"headers too long": append(withLen(20, 100), 0, 0, 0, 0, 0, 0, 0, 0),
	}
	// A prelude whose CRC does not match is an error before the rest has
	// arrived.
	tests["partial, prelude CRC"] = flip(9)[:14]
	tests["partial, length garbage"] = []byte("HTTP/1.1 200 OK\r\n")
	for name, b := range tests {
		_, _, ok, err := EventStream.Cut(b)
		if err == nil || ok {
			t.Errorf("%s: Cut = ok %v, err %v; want an error", name, ok, err)
		}
		// The translator refuses such bytes too.
		if _, err := testChat.ChatStream(providers.StreamOptions{}).Event(nil, b); err == nil {
			t.Errorf("%s: Event accepted corrupt bytes", name)
		}
	}
	var cerr eventstream.ChecksumError
	if _, _, _, err := EventStream.Cut(flip(len(good) - 10)); !errors.As(err, &cerr) {
		t.Errorf("a corrupt payload gives %v, want the SDK's ChecksumError", err)
	}
}

func TestIsStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/vnd.amazon.eventstream":                true,
		"application/vnd.amazon.eventstream; charset=utf-8": true,
		"Application/VND.Amazon.EventStream":                true,
		"application/json":                                  false,
		"text/event-stream":                                 false,
		"":                                                  false,
	} {
		if got := EventStream.IsStream(ct); got != want {
			t.Errorf("IsStream(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestStreamExceptions(t *testing.T) {
	tests := []struct {
		typ              string
		status           int
		wantType, wantCd string
	}{
		{"throttlingException", 429, "rate_limit_error", "rate_limit_exceeded"},
		{"validationException", 400, "invalid_request_error", ""},
		{"modelStreamErrorException", 502, "server_error", "model_error"},
		{"serviceUnavailableException", 503, "server_error", "service_unavailable"},
		{"internalServerException", 500, "server_error", "internal_server_error"},
		{"somethingNewException", 500, "server_error", ""},
	}
	for _, tt := range tests {
		tr := testChat.ChatStream(providers.StreamOptions{IncludeUsage: true})
		out, err := tr.Event(nil, event(t, "messageStart", `{"role":"assistant"}`))
		if err != nil {
			t.Fatal(err)
		}
		n := len(out)
		msg := cut(t, encodeMessage(t, map[string]string{":exception-type": tt.typ, ":content-type": "application/json", ":message-type": "exception"}, `{"message":"m"}`))
		if out, err = tr.Event(out, msg); err != nil {
			t.Fatal(err)
		}
		// Nothing after the error, not even from Close.
		out, _ = tr.Event(out, event(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"late"}}`))
		out = tr.Close(out)
		providerkit.CheckUnifiedStream(t, out, providers.StreamOptions{IncludeUsage: true})
		var got struct{ Error providers.Error }
		if err := json.Unmarshal(bytes.TrimPrefix(out[n:], []byte("data: ")), &got); err != nil {
			t.Fatalf("%s: %v: %q", tt.typ, err, out[n:])
		}
		if got.Error.Type != tt.wantType || got.Error.Code != tt.wantCd || got.Error.Message != "m" {
			t.Errorf("%s: got %s, want type %s code %s", tt.typ, out[n:], tt.wantType, tt.wantCd)
		}
		if e := mapError(0, tt.typ, "m"); e.Status != tt.status {
			t.Errorf("%s: status %d, want %d", tt.typ, e.Status, tt.status)
		}
	}
	// A context-length validation error in a stream says so.
	tr := testChat.ChatStream(providers.StreamOptions{})
	out, _ := tr.Event(nil, cut(t, encodeMessage(t, map[string]string{":exception-type": "validationException", ":message-type": "exception"},
		`{"message":"Input is too long for requested model."}`)))
	if !bytes.Contains(out, []byte(`"code":"context_length_exceeded"`)) {
		t.Errorf("got %s", out)
	}
}

func TestStreamMalformed(t *testing.T) {
	tests := map[string][]byte{
		"no message type":  cut(t, encodeMessage(t, map[string]string{":event-type": "messageStart"}, `{}`)),
		"no event type":    cut(t, encodeMessage(t, map[string]string{":message-type": "event"}, `{}`)),
		"payload not JSON": event(t, "contentBlockDelta", `{"contentBlockIndex":0,`),
		"payload an array": event(t, "contentBlockDelta", `[1]`),
		"not an event":     []byte("data: {}\n\n"),
		"raw message":      rawEvent(t, "messageStart", `{}`),
	}
	for name, ev := range tests {
		if out, err := testChat.ChatStream(providers.StreamOptions{}).Event(nil, ev); err == nil {
			t.Errorf("%s: Event = %q, want an error", name, out)
		}
	}
	// Unknown message types are skipped.
	out, err := testChat.ChatStream(providers.StreamOptions{}).Event(nil,
		cut(t, encodeMessage(t, map[string]string{":message-type": "future"}, `{}`)))
	if err != nil || len(out) != 0 {
		t.Errorf("unknown message type: %q, %v", out, err)
	}
}

// TestStreamRedactedFragments checks that redacted content sent in several
// deltas comes out as the base64 of all its bytes.
func TestStreamRedactedFragments(t *testing.T) {
	data := []byte("\x00\x01\x02 some opaque bytes \xff\xfe")
	tr := testChat.ChatStream(providers.StreamOptions{})
	var out []byte
	for _, part := range [][]byte{data[:4], data[4:5], data[5:]} {
		var err error
		out, err = tr.Event(out, event(t, "contentBlockDelta",
			`{"contentBlockIndex":3,"delta":{"reasoningContent":{"redactedContent":"`+base64.StdEncoding.EncodeToString(part)+`"}}}`))
		if err != nil {
			t.Fatal(err)
		}
	}
	out, _ = tr.Event(out, event(t, "contentBlockStop", `{"contentBlockIndex":3}`))
	want := base64.StdEncoding.EncodeToString(data)
	if gjson.GetBytes(providerkit.Data(out)[0], "choices.0.delta.thinking_blocks.0.data").Str != want {
		t.Errorf("got %s, want data %s", out, want)
	}
}
