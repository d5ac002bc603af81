package guardrails

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// pieces cuts s into pieces of random lengths (1 to max bytes).
func pieces(r *rand.Rand, s string, maxLen int) []string {
	var out []string
	for s != "" {
		n := min(len(s), 1+r.IntN(maxLen))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// streamText passes the pieces through a text stream of e and returns
// what it released, and the decision that stopped it.
func streamText(t testing.TB, e *Engine, ps []string) (string, *Decision) {
	ctx := context.Background()
	ts := e.AnswerStream(Chat, nil).newTextStream()
	var b strings.Builder
	for _, p := range ps {
		out, d := ts.Write(ctx, p)
		if d != nil {
			return b.String(), d
		}
		b.WriteString(out)
	}
	out, d := ts.Close(ctx)
	b.WriteString(out)
	return b.String(), d
}

// TestStreamMatchesWhole: a text masked as it streams, cut anywhere,
// equals the text masked whole, for every text of the corpus (joined
// with prose, so that matches fall across pieces).
func TestStreamMatchesWhole(t *testing.T) {
	e := newEngine(t, Options{}, piiMask)
	lines := readCorpus(t)
	r := rand.New(rand.NewPCG(1, 2))
	for i, cl := range lines {
		text := "before " + cl.text + " after"
		vals := []string{text}
		e.run(context.Background(), &input{dir: Response}, vals, nil)
		for _, maxLen := range []int{1, 3, 16} {
			got, d := streamText(t, e, pieces(r, text, maxLen))
			if d != nil || got != vals[0] {
				t.Fatalf("line %d (%s:%d), pieces of up to %d:\n got %q\nwant %q", i, cl.file, cl.line, maxLen, got, vals[0])
			}
		}
	}
}

// TestStreamBlocksBeforeRelease: a blocked match is never released, not
// even its first bytes, however the stream is cut.
func TestStreamBlocksBeforeRelease(t *testing.T) {
	e := newEngine(t, Options{},
		GuardConfig{Name: "cards", Type: "pii", Action: "block", Detect: []string{"credit_card", "secret"}},
		GuardConfig{Name: "banned", Type: "regex", Pattern: `(?i)project +falcon`})
	r := rand.New(rand.NewPCG(3, 4))
	for _, tt := range []struct{ text, secret, guard string }{
		{"pay with 4111 1111 1111 1111 today", "4111", "cards"},
		{"the key is -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY----- ok", "MIIE", "cards"},
		{"about Project   Falcon and more", "Falcon", "banned"},
	} {
		for range 50 {
			got, d := streamText(t, e, pieces(r, tt.text, 5))
			if d == nil || d.Guard != tt.guard || d.Action != Block {
				t.Fatalf("%q: decision %+v", tt.text, d)
			}
			if strings.Contains(got, tt.secret) || strings.Contains(got, tt.secret[:2]) && tt.guard == "cards" && strings.Contains(got, "41") {
				t.Fatalf("%q: released %q", tt.text, got)
			}
		}
	}
}

// TestStreamHoldsLittle: ordinary prose is released as it comes, bar the
// word being written.
func TestStreamHoldsLittle(t *testing.T) {
	e := newEngine(t, Options{}, piiMask)
	ts := e.AnswerStream(Chat, nil).newTextStream()
	out, _ := ts.Write(context.Background(), "The weather today is mild, with a light breeze from the west. ")
	if held := len("The weather today is mild, with a light breeze from the west. ") - len(out); held > 4 {
		t.Errorf("held %d bytes of prose (released %q)", held, out)
	}
}

// TestHoldFollowsRuns: the runs hold follows as a text grows give what
// reading the whole window from its end gives, run by run, whatever the
// pieces, the window's start, the detectors on and the runs' limits.
func TestHoldFollowsRuns(t *testing.T) {
	// wantHold reads text from its end, each run on its own.
	wantHold := func(d *Detectors, text string) int {
		h := 0
		for c := range numRuns {
			if d.runs&(1<<c) == 0 {
				continue
			}
			n := 0
			for i := len(text) - 1; i >= 0 && n < runLimits[c] && runClasses[text[i]]&(1<<c) != 0; i-- {
				n++
			}
			h = max(h, n)
		}
		if d.On(Secret) {
			h = max(h, pemHold(text))
		}
		return min(h, len(text))
	}
	words := []string{"word", "12", " ", "@", ".", "-", "_", ":", "AB", "DE89", "+1", "(", "/", "=", "é", "\n",
		"-----BEGIN ", "-----END ", strings.Repeat("x", 300), strings.Repeat("7", 40), strings.Repeat("Zq", 2100)}
	sets := [][]Kind{Kinds(), {Email}, {Phone, USSSN}, {IBAN}, {IPAddress}, {Secret}, {Email, Secret}}
	r := rand.New(rand.NewPCG(7, 11))
	for round := range 400 {
		d := NewDetectors(sets[round%len(sets)]...)
		var text strings.Builder
		for range 1 + r.IntN(40) {
			text.WriteString(words[r.IntN(len(words))])
		}
		var st runs
		lo, end := 0, 0
		for _, p := range pieces(r, text.String(), 1+r.IntN(64)) {
			end += len(p)
			// The window starts anywhere before the new piece.
			lo = min(end-len(p), lo+r.IntN(200))
			win := text.String()[lo:end]
			got, want := d.hold(win, len(win)-len(p), &st), wantHold(&d, win)
			if got != want {
				t.Fatalf("round %d, %v: hold of %q after %q = %d, reading it whole %d", round, sets[round%len(sets)], win, p, got, want)
			}
		}
	}
}

// chatChunk is a chat.completion.chunk with content for choice 0.
func chatChunk(content string) []byte {
	b, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": content}, "finish_reason": nil}}})
	return b
}

// appendClones appends copies of evs, which are the stream's until its
// next call.
func appendClones(dst, evs [][]byte) [][]byte {
	for _, e := range evs {
		dst = append(dst, bytes.Clone(e))
	}
	return dst
}

// runStream passes events through an answer stream and returns what was
// sent and the decision that stopped it.
func runStream(t *testing.T, s *AnswerStream, events [][]byte, end bool) ([][]byte, *Decision) {
	t.Helper()
	return runBatches(t, s, events, 1, end)
}

// runBatches runs events through s as a host does the events of its
// provider's writes (feed), and checks that what it sent is JSON.
func runBatches(t *testing.T, s *AnswerStream, events [][]byte, batch int, end bool) ([][]byte, *Decision) {
	t.Helper()
	sent, d := feed(s, events, batch, end)
	for _, ev := range sent {
		if !json.Valid(ev) {
			t.Fatalf("not JSON: %s", ev)
		}
	}
	return sent, d
}

// feed runs events through s batch at a time (the last batch may be
// shorter), each batch added from one buffer, flushed once, and the
// buffer overwritten once the flush returns: the stream keeps no
// reference to what it is given.
func feed(s *AnswerStream, events [][]byte, batch int, end bool) ([][]byte, *Decision) {
	ctx := context.Background()
	var sent [][]byte
	var buf []byte
	for len(events) > 0 {
		n := min(batch, len(events))
		buf = buf[:0]
		for _, ev := range events[:n] {
			buf = append(buf, ev...)
		}
		at := 0
		for _, ev := range events[:n] {
			if d := s.Add(ctx, buf[at:at+len(ev)]); d != nil {
				return sent, d
			}
			at += len(ev)
		}
		events = events[n:]
		out, d := s.Flush(ctx)
		if d != nil {
			return sent, d
		}
		sent = appendClones(sent, out)
		for i := range buf {
			buf[i] = '#'
		}
	}
	if end {
		out, d := s.End(ctx)
		if d != nil {
			return sent, d
		}
		sent = appendClones(sent, out)
	}
	return sent, nil
}

// TestAnswerStreamChat: a chat stream keeps its events, in order, with
// the texts masked across chunks; tool-call arguments likewise.
func TestAnswerStreamChat(t *testing.T) {
	e := newEngine(t, Options{}, piiMask)
	var events [][]byte
	for _, p := range []string{"Write to bob@exam", "ple.com or call +1 2", "02 555 0173", "."} {
		events = append(events, chatChunk(p))
	}
	args := []string{`{"to":"al`, `ice@example.org"}`}
	for i, a := range args {
		tc := map[string]any{"index": 0, "function": map[string]any{"arguments": a}}
		if i == 0 {
			tc["id"], tc["type"] = "call_1", "function"
		}
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{tc}}}}})
		events = append(events, b)
	}
	events = append(events, []byte(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`),
		[]byte(`{"choices":[],"usage":{"prompt_tokens":3}}`))
	for _, batch := range batchSizes(len(events)) {
		sent, d := runBatches(t, e.AnswerStream(Chat, nil), events, batch, true)
		if d != nil {
			t.Fatal(d)
		}
		if len(sent) != len(events) {
			t.Fatalf("%d a flush: %d events sent of %d", batch, len(sent), len(events))
		}
		var content, arguments strings.Builder
		for _, ev := range sent {
			content.WriteString(gjson.GetBytes(ev, "choices.0.delta.content").Str)
			arguments.WriteString(gjson.GetBytes(ev, "choices.0.delta.tool_calls.0.function.arguments").Str)
		}
		if got := content.String(); got != "Write to [EMAIL] or call [PHONE]." {
			t.Errorf("%d a flush: content %q", batch, got)
		}
		if got := arguments.String(); got != `{"to":"[EMAIL]"}` {
			t.Errorf("%d a flush: arguments %q", batch, got)
		}
		if gjson.GetBytes(sent[4], "choices.0.delta.tool_calls.0.id").Str != "call_1" {
			t.Errorf("%d a flush: the tool call's first event lost its id: %s", batch, sent[4])
		}
		if gjson.GetBytes(sent[len(sent)-1], "usage.prompt_tokens").Int() != 3 {
			t.Errorf("%d a flush: usage chunk: %s", batch, sent[len(sent)-1])
		}
	}
}

// TestAnswerStreamManyTexts: an answer of more texts than a stream finds
// one by one (parallel tool calls, their arguments interleaved) keeps each
// text apart and masks it across its events; the stream, released, then
// serves an answer of one text.
func TestAnswerStreamManyTexts(t *testing.T) {
	e := newEngine(t, Options{}, piiMask)
	const calls = fewTexts + 4
	var events [][]byte
	// Each ends in a number, which its text holds until its end.
	for _, part := range []string{`{"to":"user%d@exa`, `mple.com","n":%d`, `%d`} {
		for i := range calls {
			tc := map[string]any{"index": i, "function": map[string]any{"arguments": strings.ReplaceAll(part, "%d", strconv.Itoa(i))}}
			b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{tc}}}}})
			events = append(events, b)
		}
	}
	events = append(events, []byte(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`))
	s := e.AnswerStream(Chat, nil)
	for _, batch := range batchSizes(len(events)) {
		sent, d := runBatches(t, s, events, batch, true)
		if d != nil || len(sent) != len(events) {
			t.Fatalf("%d a flush: %d events sent of %d, %v", batch, len(sent), len(events), d)
		}
		args := make([]strings.Builder, calls)
		for _, ev := range sent {
			tc := gjson.GetBytes(ev, "choices.0.delta.tool_calls.0")
			if tc.Exists() {
				args[tc.Get("index").Int()].WriteString(tc.Get("function.arguments").Str)
			}
		}
		for i := range args {
			if want := fmt.Sprintf(`{"to":"[EMAIL]","n":%d%d`, i, i); args[i].String() != want {
				t.Errorf("%d a flush: call %d's arguments %q, want %q", batch, i, args[i].String(), want)
			}
		}
		s.Release()
		// Most often the same stream again, from the engine's pool.
		s = e.AnswerStream(Chat, nil)
		one, d := runBatches(t, s, [][]byte{chatChunk("to bob@exa"), chatChunk("mple.com")}, 1, true)
		if d != nil || gjson.GetBytes(one[0], "choices.0.delta.content").Str+gjson.GetBytes(one[1], "choices.0.delta.content").Str != "to [EMAIL]" {
			t.Fatalf("%d a flush: then one text: %q, %v", batch, one, d)
		}
		s.Release()
		s = e.AnswerStream(Chat, nil)
	}
}

// batchSizes are the numbers of events a flush the tests of n events run
// with: one (a provider's write of one event), two, three and all.
func batchSizes(n int) []int { return []int{1, 2, 3, n} }

// TestAnswerStreamBlock: a block stops the stream before the match, with
// the guard's decision.
func TestAnswerStreamBlock(t *testing.T) {
	e := newEngine(t, Options{}, GuardConfig{Name: "secrets", Type: "pii", Detect: []string{"secret"}, Action: "block"})
	events := [][]byte{chatChunk("here: ghp_"), chatChunk("Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz"), chatChunk(" done")}
	for _, batch := range batchSizes(len(events)) {
		s := e.AnswerStream(Chat, nil)
		sent, d := runBatches(t, s, events, batch, true)
		if d == nil || d.Guard != "secrets" || d.Allowed {
			t.Fatalf("%d a flush: decision %+v", batch, d)
		}
		for _, ev := range sent {
			if strings.Contains(string(ev), "ghp") {
				t.Errorf("%d a flush: sent %s", batch, ev)
			}
		}
		if _, d2 := s.Event(context.Background(), chatChunk("more")); d2 != d {
			t.Errorf("%d a flush: the stream went on after a block", batch)
		}
		if got := s.Decisions(); len(got) != 1 || got[0].Action != Block || !got[0].Matched {
			t.Errorf("%d a flush: decisions %+v", batch, got)
		}
	}
}

// TestAnswerStreamReleased: a released stream serves the next answer of
// its engine as a new one would, whatever the one before left (a block
// with text held, a masked Responses text, an answer cut short), from one
// goroutine and from many at once.
func TestAnswerStreamReleased(t *testing.T) {
	guards := []GuardConfig{piiMask, {Name: "banned", Type: "regex", Pattern: "(?i)project +falcon", Action: "block"}}
	e := newEngine(t, Options{}, guards...)
	ctx := context.Background()
	answers := []struct {
		api    API
		events [][]byte
		end    bool
	}{
		{Chat, [][]byte{chatChunk("mail bob@exa"), chatChunk("mple.com about project fal"), chatChunk("con now"), chatChunk(" ok")}, true},
		{Responses, [][]byte{[]byte(`{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"call +1 202 "}`),
			[]byte(`{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"555 0173 now"}`),
			[]byte(`{"type":"response.output_text.done","output_index":0,"content_index":0,"text":"call +1 202 555 0173 now"}`)}, true},
		{Chat, [][]byte{chatChunk("write to carol@"), chatChunk("example.org")}, false},
		{Chat, [][]byte{chatChunk("word1 "), chatChunk("word2 "), chatChunk("4111 1111 1111 1111")}, true},
	}
	run := func(e *Engine, i int) string {
		a := answers[i%len(answers)]
		s := e.AnswerStream(a.api, nil)
		defer s.Release()
		var b strings.Builder
		for _, ev := range a.events {
			out, d := s.Event(ctx, ev)
			if d != nil {
				return b.String() + fmt.Sprintf("|blocked by %s", d.Guard)
			}
			b.Write(bytes.Join(out, []byte("\n")))
		}
		if a.end {
			out, d := s.End(ctx)
			if d != nil {
				return b.String() + fmt.Sprintf("|blocked by %s", d.Guard)
			}
			b.Write(bytes.Join(out, []byte("\n")))
		}
		return b.String() + fmt.Sprint(untallied(s.Decisions()))
	}
	// What each answer gives from a stream never used before: of an
	// engine of its own, whose guards' tallies are others.
	want := make([]string, len(answers))
	for i := range answers {
		want[i] = run(newEngine(t, Options{}, guards...), i)
	}
	for i := range 4 * len(answers) {
		if got := run(e, i); got != want[i%len(answers)] {
			t.Fatalf("answer %d from a released stream:\n%s\nwant\n%s", i%len(answers), got, want[i%len(answers)])
		}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				if got := run(e, g+i); got != want[(g+i)%len(answers)] {
					t.Errorf("answer %d at once with others:\n%s\nwant\n%s", (g+i)%len(answers), got, want[(g+i)%len(answers)])
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestAnswerStreamResponses: Responses deltas are masked, and the events
// that repeat the whole text carry the masked whole.
func TestAnswerStreamResponses(t *testing.T) {
	e := newEngine(t, Options{}, piiMask)
	ev := func(s string) []byte { return []byte(s) }
	events := [][]byte{
		ev(`{"type":"response.created","sequence_number":0,"response":{"id":"r","output":[]}}`),
		ev(`{"type":"response.output_text.delta","sequence_number":1,"item_id":"m","output_index":0,"content_index":0,"delta":"mail bob@"}`),
		ev(`{"type":"response.output_text.delta","sequence_number":2,"item_id":"m","output_index":0,"content_index":0,"delta":"example.com"}`),
		ev(`{"type":"response.output_text.done","sequence_number":3,"item_id":"m","output_index":0,"content_index":0,"text":"mail bob@example.com"}`),
		ev(`{"type":"response.content_part.done","sequence_number":4,"item_id":"m","output_index":0,"content_index":0,"part":{"type":"output_text","text":"mail bob@example.com","annotations":[]}}`),
		ev(`{"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":{"id":"m","type":"message","role":"assistant","content":[{"type":"output_text","text":"mail bob@example.com","annotations":[]}]}}`),
		ev(`{"type":"response.completed","sequence_number":6,"response":{"id":"r","output":[{"id":"m","type":"message","role":"assistant","content":[{"type":"output_text","text":"mail bob@example.com","annotations":[]}]},{"type":"message","content":[{"type":"output_text","text":"whole 10.0.0.1"}]}]}}`),
	}
	for _, batch := range batchSizes(len(events)) {
		sent, d := runBatches(t, e.AnswerStream(Responses, nil), events, batch, false)
		if d != nil {
			t.Fatal(d)
		}
		if len(sent) != len(events) {
			t.Fatalf("%d a flush: %d events of %d", batch, len(sent), len(events))
		}
		var deltas string
		for i, s := range sent {
			if n := gjson.GetBytes(s, "sequence_number").Int(); n != int64(i) {
				t.Errorf("%d a flush: event %d has sequence number %d", batch, i, n)
			}
			deltas += gjson.GetBytes(s, "delta").Str
			if strings.Contains(string(s), "bob@") || strings.Contains(string(s), "10.0.0.1") {
				t.Errorf("%d a flush: event %d: %s", batch, i, s)
			}
		}
		if deltas != "mail [EMAIL]" || gjson.GetBytes(sent[3], "text").Str != "mail [EMAIL]" {
			t.Errorf("%d a flush: deltas %q, done %s", batch, deltas, sent[3])
		}
		if gjson.GetBytes(sent[6], "response.output.1.content.0.text").Str != "whole [IP_ADDRESS]" {
			t.Errorf("%d a flush: completed %s", batch, sent[6])
		}
	}
}

// TestAnswerStreamMessages: Messages text and input_json deltas are
// masked; a block's stop flushes its text; pings pass.
func TestAnswerStreamMessages(t *testing.T) {
	e := newEngine(t, Options{}, piiMask)
	ev := func(s string) []byte { return []byte(s) }
	events := [][]byte{
		ev(`{"type":"message_start","message":{"id":"m","content":[]}}`),
		ev(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		ev(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ssn 321-54-"}}`),
		ev(`{"type":"ping"}`),
		ev(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"9876"}}`),
		ev(`{"type":"content_block_stop","index":0}`),
		ev(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`),
		ev(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"ip\": \"192.168."}}`),
		ev(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"0.1\"}"}}`),
		ev(`{"type":"content_block_stop","index":1}`),
		ev(`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`),
		ev(`{"type":"message_stop"}`),
	}
	for _, batch := range batchSizes(len(events)) {
		sent, d := runBatches(t, e.AnswerStream(Messages, nil), events, batch, false)
		if d != nil {
			t.Fatal(d)
		}
		if len(sent) != len(events) {
			t.Fatalf("%d a flush: %d events of %d", batch, len(sent), len(events))
		}
		var text, js string
		for _, s := range sent {
			text += gjson.GetBytes(s, "delta.text").Str
			js += gjson.GetBytes(s, "delta.partial_json").Str
		}
		if text != "ssn [US_SSN]" || js != `{"ip": "[IP_ADDRESS]"}` {
			t.Errorf("%d a flush: text %q, json %q", batch, text, js)
		}
		stop := -1
		for i, s := range sent {
			if gjson.GetBytes(s, "type").Str == "content_block_stop" {
				stop = i
				break
			}
			if i > 0 && gjson.GetBytes(s, "type").Str == "content_block_delta" && gjson.GetBytes(s, "index").Int() == 1 {
				t.Fatalf("%d a flush: block 1 before block 0 stopped", batch)
			}
		}
		if stop < 0 {
			t.Fatalf("%d a flush: no stop", batch)
		}
	}
}

// TestAnswerStreamKeepsBytes: with nothing to mask, every event leaves as
// it came, byte for byte, however many events a flush decides on.
func TestAnswerStreamKeepsBytes(t *testing.T) {
	e := newEngine(t, Options{}, piiMask)
	var events [][]byte
	for i := range 12 {
		events = append(events, fmt.Appendf(nil, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1795448284,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" word%d"},"logprobs":null,"finish_reason":null}]}`, i))
	}
	events = append(events, []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`))
	for _, batch := range []int{1, 2, 5, len(events)} {
		sent, d := runBatches(t, e.AnswerStream(Chat, nil), events, batch, true)
		if d != nil {
			t.Fatal(d)
		}
		if len(sent) != len(events) {
			t.Fatalf("%d a flush: %d events of %d", batch, len(sent), len(events))
		}
		for i := range sent {
			if !bytes.Equal(sent[i], events[i]) {
				t.Errorf("%d a flush: event %d\n%s\nwant\n%s", batch, i, sent[i], events[i])
			}
		}
	}
}

// TestAnswerStreamEscapes: pieces with escapes, first, between and last
// in a flush, are decoded as the text is received, and a match across
// them is masked; a string with a bad escape is no text, and changes
// nothing of what its text was given before it.
func TestAnswerStreamEscapes(t *testing.T) {
	e := newEngine(t, Options{}, piiMask)
	chunk := func(raw string) []byte {
		return []byte(`{"choices":[{"index":0,"delta":{"content":` + raw + `},"finish_reason":null}]}`)
	}
	for _, tt := range []struct {
		name string
		raws []string
		want string
	}{
		{"escaped first", []string{`"mail\tbob@exa"`, `"mple.com now"`, `" done"`}, "mail\t[EMAIL] now done"},
		{"escaped between", []string{`"mail bob@exa"`, `"mple.com\n\""`, `" done"`}, "mail [EMAIL]\n\" done"},
		{"escaped last", []string{`"mail bob@exa"`, `"mple."`, `"com\u00e9\n"`}, "mail [EMAIL]é\n"},
		{"every one", []string{`"\"bob@exa"`, `"\u006dple.com\""`, `"\t"`}, "\"[EMAIL]\"\t"},
		{"a bad escape", []string{`"mail bob@exa"`, `"mple\x.com"`, `"mple.com"`}, "mail [EMAIL]"},
	} {
		var events [][]byte
		for _, r := range tt.raws {
			events = append(events, chunk(r))
		}
		bad := tt.name == "a bad escape"
		for _, batch := range batchSizes(len(events)) {
			sent, d := feed(e.AnswerStream(Chat, nil), events, batch, true)
			if d != nil || len(sent) != len(events) {
				t.Fatalf("%s, %d a flush: %d events of %d, %v", tt.name, batch, len(sent), len(events), d)
			}
			var got strings.Builder
			for i, ev := range sent {
				if bad && i == 1 {
					if !bytes.Equal(ev, events[1]) {
						t.Errorf("%s, %d a flush: %s, want it as it came", tt.name, batch, ev)
					}
					continue
				}
				got.WriteString(gjson.GetBytes(ev, "choices.0.delta.content").Str)
			}
			if got.String() != tt.want {
				t.Errorf("%s, %d a flush: %q, want %q", tt.name, batch, got.String(), tt.want)
			}
		}
	}
}

// TestAnswerStreamFlowsBeforeText: what comes before a text's first
// piece is not held for it. The chunk that opens a choice (its role and
// an empty content) and the reasoning that follows it reach the client
// as they come, not once the answer's first words, or its end for an
// answer of tool calls alone, release them.
func TestAnswerStreamFlowsBeforeText(t *testing.T) {
	e := newEngine(t, Options{}, piiMask)
	ctx := context.Background()
	role := []byte(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
	reasoning := func(s string) []byte {
		return []byte(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"reasoning_content":"` + s + `"},"finish_reason":null}]}`)
	}
	call := func(i int, s string) []byte {
		return []byte(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":` + strconv.Itoa(i) + `,"function":{"arguments":"` + s + `"}}]},"finish_reason":null}]}`)
	}
	args := func(s string) []byte { return call(0, s) }
	cases := []struct {
		name   string
		events [][]byte
		// sent is how many events have reached the client after each.
		sent []int
	}{
		{"role then words", [][]byte{role, chatChunk("Hello"), chatChunk(" there")}, []int{1, 1, 2}},
		{"role then reasoning", [][]byte{role, reasoning("Let me"), reasoning(" think"), chatChunk("Hi")}, []int{1, 2, 3, 3}},
		// A piece of arguments that its text's guards release whole
		// leaves at once.
		{"role then tool calls", [][]byte{role, args(`{\"a\"`), args(`:1}`)}, []int{1, 2, 3}},
		// The tool calls end the choice's text: its last words leave with
		// the first of them, not with the finish.
		{"text then tool calls", [][]byte{chatChunk("Let me check."), args(`{\"city\":\"`), args(`Paris\"}`)}, []int{0, 2, 3}},
		// A number may go on in the next piece: its event waits for it,
		// the next tool call's for nothing more.
		{"tool calls one after another", [][]byte{call(0, `{\"n\":12`), call(0, `}`), call(1, `{\"n\":3`), call(1, `}`)}, []int{0, 2, 2, 4}},
		{"empty content after words", [][]byte{chatChunk("Hi bob"), chatChunk(""), reasoning("x")}, []int{0, 1, 1}},
	}
	for _, c := range cases {
		s := e.AnswerStream(Chat, nil)
		n := 0
		for i, ev := range c.events {
			out, d := s.Event(ctx, ev)
			if d != nil {
				t.Fatal(d)
			}
			if n += len(out); n != c.sent[i] {
				t.Errorf("%s: %d events sent after event %d, want %d", c.name, n, i, c.sent[i])
			}
		}
		out, d := s.End(ctx)
		if d != nil || n+len(out) != len(c.events) {
			t.Errorf("%s: %d events sent in all of %d (%v)", c.name, n+len(out), len(c.events), d)
		}
		s.Release()
	}
}

// TestAnswerStreamTextAfterEnd: a piece that comes after its text ended
// (a provider that sends text after a choice's finish_reason, a block's
// stop or a part's done) is a text of its own, guarded and released in
// full by the stream's end: nothing of it is lost, nor sent unguarded.
func TestAnswerStreamTextAfterEnd(t *testing.T) {
	e := newEngine(t, Options{}, piiMask)
	cases := []struct {
		api    API
		path   string // of each event's text
		events []string
		want   string
	}{
		{Chat, "choices.0.delta.content", []string{
			`{"choices":[{"index":0,"delta":{"content":"Hi bob"},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"choices":[{"index":0,"delta":{"content":" mail al"},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"content":"ice@example.org again"},"finish_reason":null}]}`,
		}, "Hi bob mail [EMAIL] again"},
		{Chat, "choices.0.delta.content", []string{
			`{"choices":[{"index":0,"delta":{"content":"Hi bob"},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"content":" mail al"},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"content":"ice@example.org again"},"finish_reason":null}]}`,
		}, "Hi bob mail [EMAIL] again"},
		{Messages, "delta.text", []string{
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi bob"}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" mail al"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ice@example.org again"}}`,
		}, "Hi bob mail [EMAIL] again"},
		{Responses, "delta", []string{
			`{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"Hi bob"}`,
			`{"type":"response.output_text.done","output_index":0,"content_index":0,"text":"Hi bob"}`,
			`{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":" mail al"}`,
			`{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"ice@example.org again"}`,
		}, "Hi bob mail [EMAIL] again"},
	}
	for _, c := range cases {
		var events [][]byte
		for _, ev := range c.events {
			events = append(events, []byte(ev))
		}
		for _, batch := range batchSizes(len(events)) {
			s := e.AnswerStream(c.api, nil)
			sent, d := runBatches(t, s, events, batch, true)
			if d != nil || len(sent) != len(events) {
				t.Fatalf("%v, %d a flush: %d events sent of %d, %v", c.api, batch, len(sent), len(events), d)
			}
			var got strings.Builder
			for _, ev := range sent {
				got.WriteString(gjson.GetBytes(ev, c.path).Str)
			}
			if got.String() != c.want {
				t.Errorf("%v, %d a flush: %q, want %q", c.api, batch, got.String(), c.want)
			}
			s.Release()
		}
	}
}

// TestAnswerStreamMalformedChunk: a chat chunk that stops being JSON after
// its text carries that text as any chunk does, guarded: the text is not
// sent twice, in it as it came and masked in a later event, and nothing
// the chunk says ends the text.
func TestAnswerStreamMalformedChunk(t *testing.T) {
	e := newEngine(t, Options{}, piiMask)
	events := [][]byte{
		[]byte(`{"choices":[{"index":0,"delta":{"content":"mail bob@exa"},"finish_reason":"stop"}]` + "\x00"),
		[]byte(`{"choices":[{"index":0,"delta":{"content":"mple.com"},"finish_reason":null}]}`),
		[]byte(`{"choices":[{"index":0,"delta":{"content":" now"},"finish_reason":null}]}`),
	}
	for _, batch := range batchSizes(len(events)) {
		s := e.AnswerStream(Chat, nil)
		sent, d := feed(s, events, batch, true)
		if d != nil || len(sent) != len(events) {
			t.Fatalf("%d a flush: %d events sent of %d, %v", batch, len(sent), len(events), d)
		}
		var text strings.Builder
		for _, ev := range sent {
			text.WriteString(gjson.GetBytes(ev, "choices.0.delta.content").Str)
		}
		if text.String() != "mail [EMAIL] now" {
			t.Errorf("%d a flush: the stream carries %q, want %q", batch, text.String(), "mail [EMAIL] now")
		}
		s.Release()
	}
}

// untallied returns copies of ds without their guards' tallies, which
// differ from engine to engine.
func untallied(ds []Decision) []Decision {
	out := slices.Clone(ds)
	for i := range out {
		out[i].tally = nil
	}
	return out
}
