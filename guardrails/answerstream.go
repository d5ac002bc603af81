package guardrails

import (
	"bytes"
	"context"
	"slices"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// An AnswerStream guards one streamed answer event by event, as the host
// sends it to the client: chat.completion.chunk objects, Responses events
// or Messages events (the JSON of each event's data). The texts of the
// events — a chat chunk's delta.content, refusal and tool-call arguments,
// response.output_text.delta, response.refusal.delta and
// response.function_call_arguments.delta, a Messages content_block_delta's
// text and partial_json — each go through a TextStream.
//
// An event that carries text is held until the next event of the same
// text (or its end) arrives — one whose string is empty, of a text that
// holds nothing, is not — and leaves with the text released by then in
// place of its own: text released as the next piece comes moves to the
// event before it, and what the guards hold past that (an address the
// next piece has not ended) goes with a later event of the text. No
// event is added, dropped or reordered (events behind a held one wait
// for it). Events that end a text (finish_reason, response.*.done,
// content_block_stop, message_stop, response.completed) first release
// the rest of it, and carry the masked whole where they repeat it
// (response.output_text.done's text, output_item.done, completed).
//
// It is not safe for concurrent use.
type AnswerStream struct {
	api    API
	in     input
	guards []*guard
	decs   []Decision // one per guard, over the whole stream

	// The stream's texts, in the order they began, and by key once they
	// are more than fewTexts (an answer of many tool calls): most streams
	// have one or two, found without a map's code.
	texts []keyedText
	byKey map[textKey]*TextStream
	// walkChunks walks every chat chunk (readChunk's tests).
	walkChunks bool
	// The head of the chat chunk before (what comes before its choices),
	// and its shape: most often those of this one too.
	head  []byte
	shape chunkShape
	// The text of the event before, most often that of this one too.
	lastKey textKey
	last    *TextStream
	held    []heldEvent       // in their order, in one array for the whole stream
	kept    []byte            // the data of the held events, in their order
	queued  []*TextStream     // the texts with pieces to decide on at the flush
	final   map[string]string // whole texts as received → as released
	stop    *Decision

	// Reused from one event to the next: the events Event returns, the
	// slots of a chat chunk.
	evs   [][]byte
	slots []slot

	// The events placed by one call, for the caller to copy before the
	// next.
	placed []byte

	// The engine whose pool a released stream goes back to, and the text
	// streams of the streams before it, to be used again.
	eng   *Engine
	spare []*TextStream
}

// textKey names one text of a stream: a choice's content (a=choice), a
// tool call's arguments (b=tool call), a Responses content part
// (a=output_index, b=content_index), a Messages block (a=index).
type textKey struct {
	a, b int
	kind textKind
}

type textKind uint8

// keyedText is a text of a stream and its key.
type keyedText struct {
	k textKey
	t *TextStream
}

// fewTexts is the most texts a stream finds by their keys one by one.
const fewTexts = 8

const (
	kindContent textKind = iota
	kindRefusal
	kindArguments
)

// heldEvent is an event waiting for its texts. The held events are kept
// by value, side by side: a stream's next event finds the one before it
// next to it, not somewhere else on the heap.
type heldEvent struct {
	data   []byte
	many   []slot  // the slots of an event of more than one text
	one    [1]slot // the slot of an event of one text
	caller bool    // data is the caller's: copied at the flush
}

// slots are h's slots, in h itself for an event of one text: valid until
// the held events move.
func (h *heldEvent) slots() []slot {
	if h.many != nil || h.one[0].t == nil {
		return h.many
	}
	return h.one[:]
}

// slot is a text's string in an event: data[start:end], quotes included.
// It is made and read for every event: it keeps to four fields, which the
// compiler holds in registers (a fifth sends it through memory).
type slot struct {
	t          *TextStream
	start, end int
	later      bool // a later event carries t, or the string is empty and t holds nothing (set when the event is settled)
}

// AnswerStream returns the guard of a streamed answer of api for s, or
// nil when no guard applies to answers for s.
func (e *Engine) AnswerStream(api API, s *Scope) *AnswerStream {
	if !e.Applies(Response, s) {
		return nil
	}
	a, _ := e.streams.Get().(*AnswerStream)
	if a == nil {
		a = &AnswerStream{eng: e, final: make(map[string]string)}
	}
	a.api, a.in = api, input{api: api, dir: Response, scope: s}
	for _, g := range e.guards {
		if g.applies(Response, s) {
			a.guards = append(a.guards, g)
			a.decs = append(a.decs, Decision{Guard: g.name, Index: g.index, Type: g.typ, Direction: Response, Allowed: true, tally: g.tally})
		}
	}
	return a
}

// Decisions returns each guard's decision over the stream so far, for
// the host's metrics and events at the stream's end. The slice is the
// stream's, valid until its next event or its Release: the caller copies
// what it keeps.
func (s *AnswerStream) Decisions() []Decision { return s.decs }

// maxPooled is the most a released stream's buffer may hold to be kept
// for the next stream: one larger (an answer repeated whole) is left to
// the collector.
const maxPooled = 64 << 10

// maxPooledTexts is the most texts a released stream keeps room for.
const maxPooledTexts = 64

// maxSpare is the most text streams a released stream keeps for the
// next: one text or two most often.
const maxSpare = 8

// Release gives the stream back, to serve a later answer of its engine:
// its arrays, its text streams and their windows are used again. Neither
// the stream nor anything it returned may be used after.
func (s *AnswerStream) Release() {
	for _, kt := range s.texts {
		if len(s.spare) < maxSpare && kt.t.reset() {
			s.spare = append(s.spare, kt.t)
		}
	}
	// The stream lets go of what it points to here, not event by event:
	// its arrays are cleared past their lengths too.
	clear(s.texts[:cap(s.texts)])
	if cap(s.texts) > maxPooledTexts {
		s.texts = nil
	}
	clear(s.byKey)
	clear(s.final)
	clear(s.held[:cap(s.held)])
	clear(s.queued[:cap(s.queued)])
	clear(s.evs[:cap(s.evs)])
	clear(s.slots[:cap(s.slots)])
	for _, b := range []*[]byte{&s.head, &s.kept, &s.placed, &s.shape.pre, &s.shape.post} {
		if cap(*b) > maxPooled {
			*b = nil
		}
		*b = (*b)[:0]
	}
	*s = AnswerStream{eng: s.eng, texts: s.texts[:0], byKey: s.byKey, final: s.final, head: s.head, kept: s.kept, placed: s.placed,
		shape: chunkShape{pre: s.shape.pre, post: s.shape.post},
		held:  s.held[:0], queued: s.queued[:0], evs: s.evs[:0], slots: s.slots[:0], spare: s.spare,
		guards: s.guards[:0], decs: s.decs[:0]}
	s.eng.streams.Put(s)
}

// Event takes the data of the next event and returns the events to send
// now, in order: Add, then Flush.
func (s *AnswerStream) Event(ctx context.Context, data []byte) ([][]byte, *Decision) {
	if d := s.Add(ctx, data); d != nil {
		return nil, d
	}
	return s.Flush(ctx)
}

// Add takes the data of the next event, to be decided on at the next
// Flush: the events of one write of the provider's stream are added one
// by one, then flushed once, and their texts are read by the guards
// together. data is read in place until that Flush, and must not change
// before it. A non-nil Decision stops the stream: a guard blocked, or
// failed closed; the host ends the stream with its error event
// (BlockedError, UndecidedError) and sends nothing more. An event that is
// not JSON passes as it is.
func (s *AnswerStream) Add(ctx context.Context, data []byte) *Decision {
	if s.stop != nil {
		return s.stop
	}
	var err *Decision
	switch s.api {
	case Chat:
		err = s.chat(ctx, data)
	case Responses:
		err = s.responses(ctx, data)
	case Messages:
		err = s.messages(ctx, data)
	default:
		s.hold(data, nil)
	}
	if err != nil {
		s.stop = err
	}
	return err
}

// Flush decides on the texts of the events added since the last flush
// and returns the events to send now, in order, with their texts
// released by then in place; a non-nil Decision stops the stream, as
// Add's does. The slice returned and the events in it are the stream's
// until the next call: the caller copies what it keeps. Once Flush
// returns, the stream reads nothing more of the events' data: what it
// holds, it copies (a stream a guard stopped reads nothing more at all).
func (s *AnswerStream) Flush(ctx context.Context) ([][]byte, *Decision) {
	return s.send(ctx, false)
}

// End ends the stream (the host calls it before its last line, chat's
// "data: [DONE]"): it releases the rest of every text and returns the
// events still held, as Flush does.
func (s *AnswerStream) End(ctx context.Context) ([][]byte, *Decision) {
	return s.send(ctx, true)
}

// send decides on what was added since the last flush, and at the end
// ends every text, then returns the events settled by then and copies
// those still held.
func (s *AnswerStream) send(ctx context.Context, end bool) ([][]byte, *Decision) {
	if s.stop != nil {
		return nil, s.stop
	}
	s.placed = s.placed[:0]
	d := s.decideQueued(ctx)
	if end && d == nil {
		d = s.closeAll(ctx)
	}
	if d != nil {
		s.stop = d
		return nil, d
	}
	out := s.emit()
	s.own()
	return out, nil
}

// text returns the stream of k, made at its first piece, and made anew
// at a piece that comes after k's text ended (a provider that sends text
// after a choice's finish_reason, a block's stop or a part's done): that
// is a text of its own, which the stream's end ends in turn. The ended
// one stays with the events that carry it.
func (s *AnswerStream) text(k textKey) *TextStream {
	if s.last != nil && s.lastKey == k && !s.last.closed {
		return s.last
	}
	t := s.find(k)
	switch {
	case t == nil:
		t = s.newTextStream()
		s.texts = append(s.texts, keyedText{k, t})
		switch n := len(s.texts); {
		case n == fewTexts+1:
			if s.byKey == nil {
				s.byKey = make(map[textKey]*TextStream)
			}
			for _, kt := range s.texts {
				s.byKey[kt.k] = kt.t
			}
		case n > fewTexts+1:
			s.byKey[k] = t
		}
	case t.closed:
		t = s.newTextStream()
		for i := range s.texts {
			if s.texts[i].k == k {
				s.texts[i].t = t
			}
		}
		if len(s.texts) > fewTexts {
			s.byKey[k] = t
		}
	}
	s.lastKey, s.last = k, t
	return t
}

// find returns the stream of k, or nil when k has none yet.
func (s *AnswerStream) find(k textKey) *TextStream {
	if len(s.texts) > fewTexts {
		return s.byKey[k]
	}
	for _, kt := range s.texts {
		if kt.k == k {
			return kt.t
		}
	}
	return nil
}

// add queues the string at raw (a slice of data) for t, to be decided on
// at the next flush, and returns its slot: none when raw is not a string.
func (s *AnswerStream) add(t *TextStream, data, raw []byte) slot {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return slot{}
	}
	// A text's one piece of a flush, without escapes, is read in place
	// (data is the caller's until then); more, or one with escapes, are
	// joined in the text's queue, decoded there: no string is made for
	// a piece.
	if in := raw[1 : len(raw)-1]; t.pieces == 0 && bytes.IndexByte(in, '\\') < 0 {
		s.queued = append(s.queued, t)
		t.piece = providers.InPlace(in)
	} else {
		q := t.queued
		if t.pieces == 1 && len(q) == 0 {
			q = append(q, t.piece...)
		}
		n := len(q)
		q, ok := appendUnquoted(q, raw)
		if !ok {
			t.queued = q[:n]
			return slot{}
		}
		if t.pieces == 0 {
			s.queued = append(s.queued, t)
		}
		t.queued = q
	}
	t.pieces++
	start := cap(data) - cap(raw)
	return slot{t: t, start: start, end: start + len(raw)}
}

// decideQueued passes every text's queued pieces through its guards, in
// the order the texts received them.
func (s *AnswerStream) decideQueued(ctx context.Context) *Decision {
	for _, t := range s.queued {
		if d := s.decide(ctx, t); d != nil {
			return d
		}
	}
	s.queued = s.queued[:0]
	return nil
}

// decide passes what is queued for t through its guards.
func (s *AnswerStream) decide(ctx context.Context, t *TextStream) *Decision {
	if t.pieces == 0 {
		return nil
	}
	piece := t.piece
	if len(t.queued) > 0 {
		piece = providers.InPlace(t.queued) // joined, or decoded
	}
	rel, d := t.Write(ctx, piece)
	t.piece, t.pieces, t.queued = "", 0, t.queued[:0]
	if d != nil {
		return d
	}
	s.released(t, rel)
	return nil
}

// released adds rel to the text of t not yet in an event; what of it
// was placed goes, the rest moving to the front.
func (s *AnswerStream) released(t *TextStream, rel string) {
	if t.placed > 0 {
		t.unplaced, t.placed = t.unplaced[:copy(t.unplaced, t.unplaced[t.placed:])], 0
	}
	t.unplaced = append(t.unplaced, rel...)
}

// close ends t, keeping its whole text for the events that repeat it.
func (s *AnswerStream) close(ctx context.Context, t *TextStream) *Decision {
	if t == nil || t.closed {
		return nil
	}
	// What every text received before is decided on first, as it was
	// received: a text's end comes after it.
	if d := s.decideQueued(ctx); d != nil {
		return d
	}
	rel, d := t.Close(ctx)
	if d != nil {
		return d
	}
	s.released(t, rel)
	if t.whole {
		s.final[t.orig.String()] = t.out.String()
	}
	return nil
}

// closeAll ends every text, in the order they began.
func (s *AnswerStream) closeAll(ctx context.Context) *Decision {
	for _, kt := range s.texts {
		if d := s.close(ctx, kt.t); d != nil {
			return d
		}
	}
	return nil
}

// hold queues an event: every event waits behind those before it, so
// that none is reordered; one with texts waits for them too.
func (s *AnswerStream) hold(data []byte, slots []slot) {
	s.held = append(s.held, heldEvent{data: data, many: slots, caller: true})
}

// own copies the data of the events still held that is the caller's.
func (s *AnswerStream) own() {
	for i := range s.held {
		if h := &s.held[i]; h.caller {
			h.data, h.caller = s.keep(h.data), false
		}
	}
}

// minKept is the least size of the array the held events are kept in.
const minKept = 2 << 10

// keep returns a copy of data, which the stream holds past the call, in
// the array of the held events. When data does not fit, the held events
// move to its front, or to a larger array when they and data need more
// than half of it: a stream reuses one array, whatever its length.
func (s *AnswerStream) keep(data []byte) []byte {
	if cap(s.kept)-len(s.kept) < len(data) {
		need := len(data)
		for i := range s.held {
			if h := &s.held[i]; !h.caller {
				need += len(h.data)
			}
		}
		k := s.kept[:0]
		if 2*need > cap(s.kept) {
			k = make([]byte, 0, max(2*need, minKept))
		}
		// The held events are in the array in their order, so each moves
		// to a place before its own, never over one still to move.
		for i := range s.held {
			h := &s.held[i]
			if h.caller {
				continue // not yet in the array
			}
			n := len(k)
			k = append(k, h.data...)
			h.data = k[n:len(k):len(k)]
		}
		s.kept = k
	}
	n := len(s.kept)
	s.kept = append(s.kept, data...)
	return s.kept[n:len(s.kept):len(s.kept)]
}

// holdOne queues an event of one text.
func (s *AnswerStream) holdOne(data []byte, sl slot) {
	if sl.t == nil {
		s.hold(data, nil)
		return
	}
	s.held = append(s.held, heldEvent{data: data, one: [1]slot{sl}, caller: true})
}

// emit returns the events at the head of the queue that are settled (each
// of whose texts has a later event, or ended), in order, with their texts
// in place.
func (s *AnswerStream) emit() [][]byte {
	out := s.evs[:0]
	n := 0
	for n < len(s.held) && s.settled(&s.held[n], s.held[n+1:]) {
		out = append(out, s.place(&s.held[n]))
		n++
	}
	// The events still held move to the front, so that the queue's array
	// serves the whole stream.
	if rest := len(s.held) - n; rest == 1 && n > 0 {
		s.held[0] = s.held[n] // most often: the event just added
		s.held = s.held[:1]
	} else {
		s.held = s.held[:copy(s.held, s.held[n:])]
	}
	s.evs = out[:0]
	return out
}

// settled reports whether every text of h has ended, has an event in
// later, or holds nothing, and notes in each slot whether a later event
// carries its text. An empty string of a text that holds nothing needs no
// later event: nothing can come to it that a later piece's own event will
// not carry, so it leaves as it is (the chunk that opens a choice does not
// wait for the answer's first words, nor the reasoning and tool calls
// behind it for them). Nor does a string of a text whose guards released
// all it received: what was released and not yet placed goes in it, and
// what comes next, in the next piece's event (tool-call arguments, whose
// pieces most often end in a quote or a brace, flow so).
func (s *AnswerStream) settled(h *heldEvent, later []heldEvent) bool {
	slots := h.slots()
	for i := range slots {
		sl := &slots[i]
		sl.later = carries(later, sl.t) || sl.end-sl.start == 2 && sl.t.atRest()
		if !sl.later && !sl.t.closed && !sl.t.drained() {
			return false
		}
	}
	return true
}

// carries reports whether one of evs has a string of t.
func carries(evs []heldEvent, t *TextStream) bool {
	for i := range evs {
		for _, sl := range evs[i].slots() {
			if sl.t == t {
				return true
			}
		}
	}
	return false
}

// place returns h's data with each text's released text in its string.
// A string whose own text is where the released text starts, and whose
// text goes on in a later event, keeps it: the rest waits for that event.
// So an answer with nothing to mask leaves each event as it came, h's data
// itself, however the guards cut what they hold.
func (s *AnswerStream) place(h *heldEvent) []byte {
	slots := h.slots()
	same := true
	for _, sl := range slots {
		same = same && keepsOwn(h, sl)
	}
	if same {
		for _, sl := range slots {
			placeOwn(sl)
		}
		return h.data
	}
	// After the events placed before in this call: an append that moves
	// the buffer leaves them where they are.
	n := len(s.placed)
	out := s.placed
	last := 0
	for _, sl := range slots {
		if keepsOwn(h, sl) {
			placeOwn(sl)
			continue
		}
		out = append(out, h.data[last:sl.start]...)
		out = jsonw.AppendString(out, providers.InPlace(sl.t.unplaced[sl.t.placed:]))
		sl.t.unplaced, sl.t.placed = sl.t.unplaced[:0], 0
		last = sl.end
	}
	out = append(out, h.data[last:]...)
	s.placed = out
	return out[n:len(out):len(out)]
}

// placeOwn takes the string's own text, kept as it is, from what was
// released of its text: the events of a read take their texts in turn,
// the rest moving nowhere until the next release.
func placeOwn(sl slot) {
	sl.t.placed += sl.end - sl.start - 2
}

// keepsOwn reports whether the string of sl in h keeps its own text:
// what was released of its text and not yet placed starts with the
// string's own bytes, when its text goes on in a later event, or is them,
// when h is its last (a string with escapes is placed anew: its bytes are
// not its text).
func keepsOwn(h *heldEvent, sl slot) bool {
	raw, rel := h.data[sl.start+1:sl.end-1], sl.t.unplaced[sl.t.placed:]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return false
	}
	if sl.later {
		return bytes.HasPrefix(rel, raw)
	}
	return bytes.Equal(rel, raw)
}

// readChunk reads a chat chunk of the common shape: by the shape of the
// chunk before when it has it, else in one pass (from its head when that
// of the chunk before), learning its head and shape for the next.
func (s *AnswerStream) readChunk(data []byte, c *chunk) bool {
	switch {
	case s.walkChunks:
		return false
	case s.shape.read(data, c):
		return true
	case !readChunk(data, c, s.head):
		return false
	}
	if !bytes.Equal(s.head, data[:c.head]) {
		s.head = append(s.head[:0], data[:c.head]...)
	}
	s.shape.learn(data, c)
	return true
}

// chat handles a chat.completion.chunk: one of the common shape read in
// one pass (readChunk), any other walked.
func (s *AnswerStream) chat(ctx context.Context, data []byte) *Decision {
	var c chunk
	if s.readChunk(data, &c) {
		if c.n == 1 && !c.ended {
			// The most common chunk: one piece of one text.
			t := c.texts[0]
			s.holdOne(data, s.add(s.text(textKey{a: c.choice, kind: t.kind}), data, data[t.start:t.end]))
			return nil
		}
		slots := s.slots[:0]
		for _, t := range c.texts[:c.n] {
			if sl := s.add(s.text(textKey{a: c.choice, kind: t.kind}), data, data[t.start:t.end]); sl.t != nil {
				slots = append(slots, sl)
			}
		}
		var ended []int
		if c.ended {
			ended = []int{c.choice}
		}
		return s.chunkRead(ctx, data, slots, ended)
	}
	slots := s.slots[:0]
	var ended []int
	var stop *Decision
	ok := providers.Members(data, func(k, v []byte) bool {
		if string(k) != "choices" {
			return true
		}
		return providers.Elements(v, func(c []byte) bool {
			// The choice's index is its first "index" member's: read where
			// the walk meets it, or looked up when a member before it needs
			// it.
			choice, known := 0, false
			index := func() int {
				if !known {
					choice, known = int(gjson.GetBytes(c, "index").Int()), true
				}
				return choice
			}
			return providers.Members(c, func(k, v []byte) bool {
				switch string(k) {
				case "index":
					if !known {
						choice, known = intOf(v), true
					}
				case "finish_reason":
					if len(v) > 0 && v[0] == '"' {
						ended = append(ended, index())
					}
				case "delta":
					stop = s.chatDelta(ctx, data, v, index(), &slots)
					return stop == nil
				}
				return true
			})
		})
	})
	if stop != nil {
		return stop
	}
	if !ok {
		// Not JSON past some point: the texts read before it stay this
		// event's (what is released of them is placed in it, as in any
		// other), but nothing it says ends a text.
		ended = nil
	}
	return s.chunkRead(ctx, data, slots, ended)
}

// chunkRead ends the texts of the choices that ended and holds the chunk
// with its texts' slots.
func (s *AnswerStream) chunkRead(ctx context.Context, data []byte, slots []slot, ended []int) *Decision {
	for _, c := range ended {
		if d := s.endTexts(ctx, c, true); d != nil {
			return d
		}
	}
	switch len(slots) {
	case 0:
		s.hold(data, nil)
	case 1:
		s.holdOne(data, slots[0])
	default:
		s.hold(data, slices.Clone(slots))
	}
	s.slots = slots[:0]
	return nil
}

// intOf is the integer raw is, as gjson reads it: a plain one directly.
func intOf(raw []byte) int {
	if len(raw) == 0 || len(raw) > 9 {
		return int(gjson.ParseBytes(raw).Int())
	}
	n := 0
	for _, c := range raw {
		if !isDigit(c) {
			return int(gjson.ParseBytes(raw).Int())
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// chatDelta adds the texts of a chunk's delta. Its tool calls end the
// choice's content and refusal: a choice's text comes before its tool
// calls (as a Messages text block ends before a tool_use block), so the
// text's last event does not hold the tool calls back until the choice
// finishes. Text a provider sends after them is a text of its own.
func (s *AnswerStream) chatDelta(ctx context.Context, data, delta []byte, choice int, slots *[]slot) *Decision {
	var stop *Decision
	add := func(k textKey, raw []byte) bool {
		if len(raw) == 0 || raw[0] != '"' {
			return true
		}
		if sl := s.add(s.text(k), data, raw); sl.t != nil {
			*slots = append(*slots, sl)
		}
		return true
	}
	providers.Members(delta, func(k, v []byte) bool {
		switch string(k) {
		case "content":
			return add(textKey{a: choice, kind: kindContent}, v)
		case "refusal":
			return add(textKey{a: choice, kind: kindRefusal}, v)
		case "tool_calls":
			if stop = s.endTexts(ctx, choice, false); stop != nil {
				return false
			}
			return providers.Elements(v, func(tc []byte) bool {
				idx := int(gjson.GetBytes(tc, "index").Int())
				args := gjson.GetBytes(tc, "function.arguments")
				if args.Type != gjson.String || args.Index <= 0 {
					return true
				}
				raw := tc[args.Index : args.Index+len(args.Raw)]
				return add(textKey{a: choice, b: idx, kind: kindArguments}, raw)
			})
		}
		return true
	})
	return stop
}

// endTexts ends the content and refusal of choice, when they began, and
// with args its tool calls' arguments too.
func (s *AnswerStream) endTexts(ctx context.Context, choice int, args bool) *Decision {
	for _, kt := range s.texts {
		if kt.k.a == choice && (args || kt.k.kind != kindArguments) {
			if d := s.close(ctx, kt.t); d != nil {
				return d
			}
		}
	}
	return nil
}

// messages handles a Messages stream event.
func (s *AnswerStream) messages(ctx context.Context, data []byte) *Decision {
	typ := gjson.GetBytes(data, "type").Str
	index := int(gjson.GetBytes(data, "index").Int())
	switch typ {
	case "content_block_delta", "content_block_start":
		field, kind := "delta.text", kindContent
		if typ == "content_block_start" {
			field = "content_block.text"
		} else if gjson.GetBytes(data, "delta.type").Str == "input_json_delta" {
			field, kind = "delta.partial_json", kindArguments
		}
		v := gjson.GetBytes(data, field)
		if v.Type != gjson.String || v.Index <= 0 || typ == "content_block_start" && v.Str == "" {
			s.hold(data, nil)
			return nil
		}
		s.holdOne(data, s.add(s.text(textKey{a: index, kind: kind}), data, data[v.Index:v.Index+len(v.Raw)]))
		return nil
	case "content_block_stop":
		for _, kind := range []textKind{kindContent, kindArguments} {
			if d := s.close(ctx, s.find(textKey{a: index, kind: kind})); d != nil {
				return d
			}
		}
	case "message_stop":
		if d := s.closeAll(ctx); d != nil {
			return d
		}
	}
	s.hold(data, nil)
	return nil
}

// responses handles a Responses stream event.
func (s *AnswerStream) responses(ctx context.Context, data []byte) *Decision {
	typ := gjson.GetBytes(data, "type").Str
	key := func(kind textKind) textKey {
		return textKey{a: int(gjson.GetBytes(data, "output_index").Int()),
			b: int(gjson.GetBytes(data, "content_index").Int()), kind: kind}
	}
	switch typ {
	case "response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta":
		v := gjson.GetBytes(data, "delta")
		if v.Type != gjson.String || v.Index <= 0 {
			s.hold(data, nil)
			return nil
		}
		s.holdOne(data, s.add(s.text(key(deltaKind(typ))), data, data[v.Index:v.Index+len(v.Raw)]))
		return nil
	case "response.output_text.done", "response.refusal.done", "response.function_call_arguments.done":
		field := map[string]string{"response.output_text.done": "text", "response.refusal.done": "refusal",
			"response.function_call_arguments.done": "arguments"}[typ]
		if d := s.close(ctx, s.find(key(deltaKind(typ)))); d != nil {
			return d
		}
		return s.repeat(ctx, data, field)
	case "response.content_part.done":
		return s.repeat(ctx, data, "part.text")
	case "response.output_item.done":
		return s.repeatNode(ctx, data, "item")
	case "response.completed", "response.incomplete", "response.failed":
		if d := s.closeAll(ctx); d != nil {
			return d
		}
		return s.repeatNode(ctx, data, "response")
	}
	s.hold(data, nil)
	return nil
}

// deltaKind is the kind of text a Responses event type carries.
func deltaKind(typ string) textKind {
	switch typ {
	case "response.refusal.delta", "response.refusal.done":
		return kindRefusal
	case "response.function_call_arguments.delta", "response.function_call_arguments.done":
		return kindArguments
	}
	return kindContent
}

// repeat sends an event that repeats a whole text at path, the text
// replaced by what was released of it.
func (s *AnswerStream) repeat(ctx context.Context, data []byte, path string) *Decision {
	v := gjson.GetBytes(data, path)
	if v.Type != gjson.String || v.Index <= 0 {
		s.hold(data, nil)
		return nil
	}
	texts := []text{{start: v.Index, end: v.Index + len(v.Raw), s: v.Str}}
	return s.replace(ctx, data, texts)
}

// repeatNode sends an event that repeats whole output items (an item, or
// a response's output) at path, their texts replaced by what was
// released of them.
func (s *AnswerStream) repeatNode(ctx context.Context, data []byte, path string) *Decision {
	v := gjson.GetBytes(data, path)
	if !v.IsObject() || v.Index <= 0 {
		s.hold(data, nil)
		return nil
	}
	w := walker{body: data}
	obj := data[v.Index : v.Index+len(v.Raw)]
	if path == "response" {
		w.answer(Responses, obj)
	} else {
		w.node(obj, 1)
	}
	if w.err != nil {
		s.hold(data, nil)
		return nil
	}
	return s.replace(ctx, data, w.texts)
}

// replace puts in data, for each of texts, what was released of it; a
// text no stream carried (a provider that sent it whole) is guarded
// here.
func (s *AnswerStream) replace(ctx context.Context, data []byte, texts []text) *Decision {
	vals := make([]string, len(texts))
	var fresh []int
	for i, t := range texts {
		if out, ok := s.final[t.s]; ok {
			vals[i] = out
		} else {
			vals[i] = t.s
			fresh = append(fresh, i)
		}
	}
	if len(fresh) > 0 {
		sub := make([]string, len(fresh))
		for j, i := range fresh {
			sub[j] = vals[i]
		}
		for gi, g := range s.guards {
			d := g.check(ctx, &s.in, sub)
			merge(&s.decs[gi], &d)
			if !d.Allowed {
				return &s.decs[gi]
			}
		}
		for j, i := range fresh {
			s.final[texts[i].s] = sub[j]
			vals[i] = sub[j]
		}
	}
	changed := false
	for i := range texts {
		changed = changed || vals[i] != texts[i].s
	}
	if changed {
		data = rewrite(data, texts, vals)
	}
	s.hold(data, nil)
	return nil
}
