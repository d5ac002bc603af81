package guardrails

import (
	"context"
	"strings"

	"github.com/modelgate/modelgate/providers"
)

// contextBytes is how much released text a stage keeps for detectors that
// look back (a word boundary, an AWS key id 64 bytes before its secret).
const contextBytes = 128

// lookahead is how many bytes after a match must be seen before it is
// final: a number's end depends on the byte after it, and on one more
// (",5" continues "1,234,5").
const lookahead = 2

// stage is one guard's part of a text stream.
type stage struct {
	g       *guard
	dec     *Decision // the guard's decision over the whole stream
	pending string    // received, not yet released (an outside service's)
	matches []Match   // the matches of a piece, reused from one to the next

	// A local guard's text: win[lo:mid] is the last bytes released, as
	// received (its context), win[mid:] what is held. The strings read from
	// it (the text write releases) are the caller's until its next write,
	// which may move what the window keeps to its front.
	win     []byte
	lo, mid int
	runs    runs // the runs that end the window's text, for hold
}

// minWindow is the least size of a stage's window.
const minWindow = 1 << 10

// write takes delta and returns what may be released; stop is true when
// the guard blocked (or failed closed): nothing more is released. final
// releases everything.
func (st *stage) write(ctx context.Context, in *input, delta string, final bool) (string, bool) {
	if st.g.local != nil {
		return st.scan(delta, final)
	}
	if st.pending == "" {
		// delta is the caller's until its next write: what is pending is
		// the stage's own.
		st.pending = strings.Clone(delta)
	} else {
		st.pending += delta
	}
	return st.screen(ctx, in, final)
}

// add appends delta to the window. When delta does not fit, what the
// window keeps (its context and what it holds) moves to its front, or to
// a larger array when that is more than half of it.
func (st *stage) add(delta string) {
	if cap(st.win)-len(st.win) < len(delta) {
		live := st.win[st.lo:]
		w := st.win[:0]
		if need := len(live) + len(delta); 2*need > cap(st.win) {
			w = make([]byte, 0, max(2*need, minWindow))
		}
		st.win, st.mid, st.lo = append(w, live...), st.mid-st.lo, 0
	}
	st.win = append(st.win, delta...)
}

// scan releases what a local guard has decided on, of the text held and
// delta.
func (st *stage) scan(delta string, final bool) (string, bool) {
	// One string of what was released last, what was held and delta,
	// read in place from the window.
	st.add(delta)
	text := providers.InPlace(st.win[st.lo:])
	o := st.mid - st.lo
	cut := len(text)
	if !final {
		cut = max(o, len(text)-st.g.local.hold(text, len(text)-len(delta), &st.runs))
	}
	var all []Match
	if st.g.local.mayMatch(text, o) {
		all = st.g.local.find(text, st.matches[:0])
		st.matches = all[:0] // for the next piece: its matches are used here only
	}
	ms := all[:0]
	for _, m := range all {
		if m.Start < o {
			continue // within what was released
		}
		if m.Start < cut && (m.End > cut || !final && st.g.local.reach(text, m)+lookahead > len(text)) {
			cut = m.Start // not final yet: held back, with all after it
		}
		if m.End <= cut {
			ms = append(ms, m)
		}
	}
	out := text[o:cut]
	if len(ms) > 0 {
		for i := range ms {
			ms[i].Start -= o
			ms[i].End -= o
		}
		d := Decision{Guard: st.g.name, Index: st.g.index, Type: st.g.typ, Direction: Response, Matched: true, Allowed: true,
			Found: st.g.found(ms, nil), tally: st.g.tally}
		switch st.g.action {
		case Block:
			d.Action, d.Allowed, d.Reason = Block, false, st.g.reason(d.Found)
		case Log:
			d.Action = Log
		case Mask:
			d.Action = Mask
			out = st.g.mask(out, ms)
		}
		merge(st.dec, &d)
		if !d.Allowed {
			return "", true
		}
	}
	// The context is the last bytes of text[:cut].
	st.lo, st.mid = st.lo+max(0, cut-contextBytes), st.lo+cut
	return out, false
}

// screen releases what an outside service has screened: a window of
// StreamWindow bytes (cut after a space when there is one in its second
// half), or the rest at the end.
func (st *stage) screen(ctx context.Context, in *input, final bool) (string, bool) {
	p := st.pending
	if p == "" || !final && len(p) < st.g.streamWindow {
		return "", false
	}
	cut := len(p)
	if !final {
		if i := strings.LastIndexAny(p, " \n\t"); i >= len(p)/2 {
			cut = i + 1
		}
	}
	vals := []string{p[:cut]}
	d := st.g.check(ctx, in, vals)
	merge(st.dec, &d)
	if !d.Allowed {
		return "", true
	}
	st.pending = p[cut:]
	return vals[0], false
}

// rank orders actions by how much they say, for a stream's decision.
var rank = [...]int{Allow: 0, Log: 1, Mask: 2, Error: 3, Block: 4}

// merge adds d, one piece of a stream, to the stream's decision into.
func merge(into, d *Decision) {
	into.Matched = into.Matched || d.Matched
	for _, f := range d.Found {
		if !contains(into.Found, f) {
			into.Found = append(into.Found, f)
		}
	}
	into.Elapsed += d.Elapsed
	if rank[d.Action] > rank[into.Action] {
		into.Action = d.Action
	}
	if d.Err != nil {
		into.Err = d.Err
	}
	if !d.Allowed {
		into.Allowed, into.Reason = false, d.Reason
	}
}

// A TextStream guards one text of a streamed answer (a choice's content,
// a tool call's arguments, a content block) as it flows: each guard in
// turn holds back only what may still be the start of a match (a pii
// guard the run of bytes its detectors' matches are made of, a regex guard
// its max_span, an outside service a window) and releases the rest,
// masked.
type TextStream struct {
	in     input
	stages []stage
	whole  bool            // orig and out are kept (Responses repeats whole texts)
	orig   strings.Builder // the text as received
	out    strings.Builder // the text as released
	closed bool

	unplaced []byte // released, not yet placed in an event: from placed on
	placed   int

	// What was received since the answer stream's last flush, to be
	// decided on at the next: pieces of them, the one in place (piece),
	// or, when there are more or it had escapes, all of them joined and
	// decoded (queued).
	pieces int
	piece  string
	queued []byte
}

// newTextStream makes the text stream of the guards of s, or takes one of
// a stream before.
func (s *AnswerStream) newTextStream() *TextStream {
	var t *TextStream
	if n := len(s.spare); n > 0 {
		t = s.spare[n-1]
		s.spare[n-1] = nil
		s.spare = s.spare[:n-1]
	} else {
		t = new(TextStream)
	}
	t.in, t.whole = s.in, s.api == Responses
	if cap(t.stages) < len(s.guards) {
		t.stages = make([]stage, len(s.guards))
	}
	t.stages = t.stages[:len(s.guards)]
	for i, g := range s.guards {
		st := &t.stages[i]
		st.g, st.dec = g, &s.decs[i]
	}
	return t
}

// reset empties t for a later stream, keeping its arrays, and reports
// whether it is worth keeping (its arrays not grown past maxPooled).
func (t *TextStream) reset() bool {
	for i := range t.stages {
		st := &t.stages[i]
		if cap(st.win) > maxPooled {
			return false
		}
		*st = stage{win: st.win[:0], matches: st.matches[:0]}
	}
	if cap(t.unplaced) > maxPooled || cap(t.queued) > maxPooled {
		return false
	}
	*t = TextStream{stages: t.stages, unplaced: t.unplaced[:0], queued: t.queued[:0]}
	return true
}

// Write takes the next piece of the text and returns what may be sent
// on. A non-nil Decision stops the stream: a guard blocked, or failed
// closed; nothing more of it may be sent.
func (t *TextStream) Write(ctx context.Context, delta string) (string, *Decision) {
	if t.whole {
		t.orig.WriteString(delta)
	}
	x := delta
	for i := range t.stages {
		st := &t.stages[i]
		var stop bool
		if x, stop = st.write(ctx, &t.in, x, false); stop {
			return "", st.dec
		}
	}
	if t.whole {
		t.out.WriteString(x)
	}
	return x, nil
}

// atRest reports whether t holds nothing: every piece it received was
// decided on, released and placed in an event.
func (t *TextStream) atRest() bool {
	return len(t.unplaced) == t.placed && t.drained()
}

// drained reports whether t's guards released all it received: nothing
// is queued for them, and none holds anything back.
func (t *TextStream) drained() bool {
	if t.pieces > 0 {
		return false
	}
	for i := range t.stages {
		if st := &t.stages[i]; st.mid < len(st.win) || st.pending != "" {
			return false
		}
	}
	return true
}

// Close ends the text and returns the rest of it, decided.
func (t *TextStream) Close(ctx context.Context) (string, *Decision) {
	if t.closed {
		return "", nil
	}
	t.closed = true
	x := ""
	for i := range t.stages {
		st := &t.stages[i]
		var stop bool
		if x, stop = st.write(ctx, &t.in, x, true); stop {
			return "", st.dec
		}
	}
	if t.whole {
		t.out.WriteString(x)
	}
	return x, nil
}
