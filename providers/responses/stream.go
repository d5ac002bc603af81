package responses

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
	"github.com/modelgate/modelgate/providers/sse"
)

// Stream translates the hub's streamed answer (chat.completion.chunk
// events, then data: [DONE]) into the Responses event stream, one event at
// a time. Every event has an event: line and a sequence_number counting
// from 0. Items follow one another: a new kind of output (reasoning, text,
// a tool call) completes the item before it, with its .done events and
// the whole item in response.output_item.done. The stream ends with
// exactly one of response.completed, response.incomplete or
// response.failed; never silently.
//
// A Stream implements providers.StreamTranslator; Fail ends it early with
// a gateway-side error.
type Stream struct {
	x       *Exchange
	seq     int64
	started bool
	done    bool // a terminal event was sent
	model   string
	tier    string
	finish  string // the hub's finish_reason, once given
	usage   usage

	items     []*outItem
	reasoning *outItem // the open reasoning item
	message   *outItem // the open message item
	calls     []*call  // every tool call, by the hub's index
	cur       *call    // the open tool call
	scratch   jsonw.List
}

// call is a tool call being streamed.
type call struct {
	index     int64 // the hub's tool_calls index
	item      *outItem
	announced bool // response.output_item.added sent
	closed    bool
	dec       inputDecoder // custom tools: the input, out of the arguments
	sent      []byte       // custom tools: the input sent in deltas
}

var _ providers.StreamTranslator = (*Stream)(nil)

// Stream returns the translator for the hub's streamed answer.
func (x *Exchange) Stream() *Stream { return &Stream{x: x} }

// Events translates every complete event in events (hub events, each
// ending in a blank line, as a hub StreamTranslator appends them) and
// appends the result to dst.
func (s *Stream) Events(dst, events []byte) []byte {
	for {
		event, rest, ok := sse.Cut(events)
		if !ok {
			return dst
		}
		dst, _ = s.Event(dst, event)
		events = rest
	}
}

// Event translates one hub event. It never fails: an event that is not a
// chunk, [DONE] or an error ends the stream with response.failed.
func (s *Stream) Event(dst, event []byte) ([]byte, error) {
	if s.done {
		return dst, nil
	}
	_, data := sse.Fields(event)
	if len(data) == 0 {
		return dst, nil // a comment, or an event without data
	}
	if bytes.Equal(data, []byte("[DONE]")) {
		return s.complete(dst), nil
	}
	if !providers.ValidJSON(data) {
		return s.fail(dst, "server_error", "the provider's stream held an event that is not JSON"), nil
	}
	v := gjson.ParseBytes(data)
	if !v.IsObject() {
		return s.fail(dst, "server_error", "the provider's stream held an event that is not a JSON object"), nil
	}
	// One pass over each level, taking the first of duplicate keys as
	// gjson's Get does.
	var errV, model, tier, usageV, choices gjson.Result
	v.ForEach(func(k, val gjson.Result) bool {
		switch k.Str {
		case "error":
			first(&errV, val)
		case "model":
			first(&model, val)
		case "service_tier":
			first(&tier, val)
		case "usage":
			first(&usageV, val)
		case "choices":
			first(&choices, val)
		}
		return true
	})
	if errV.Exists() {
		code, msg := errorCode(errV)
		return s.fail(dst, code, msg), nil
	}
	if !s.started {
		dst = s.start(dst, model)
	}
	if tier.Type == gjson.String {
		s.tier = tier.Str
	}
	if usageV.IsObject() {
		s.usage.set(usageV)
	}
	var choice gjson.Result
	if choices.IsArray() {
		choices.ForEach(func(_, c gjson.Result) bool {
			choice = c
			return false
		})
	}
	if !choice.IsObject() {
		return dst, nil
	}
	var delta, finish, logprobs gjson.Result
	choice.ForEach(func(k, val gjson.Result) bool {
		switch k.Str {
		case "delta":
			first(&delta, val)
		case "finish_reason":
			first(&finish, val)
		case "logprobs":
			first(&logprobs, val)
		}
		return true
	})
	var reasoning, alias, blocks, content, annotations, refusal, calls gjson.Result
	delta.ForEach(func(k, val gjson.Result) bool {
		switch k.Str {
		case "reasoning_content":
			first(&reasoning, val)
		case "reasoning":
			first(&alias, val)
		case "thinking_blocks":
			first(&blocks, val)
		case "content":
			first(&content, val)
		case "annotations":
			first(&annotations, val)
		case "refusal":
			first(&refusal, val)
		case "tool_calls":
			first(&calls, val)
		}
		return true
	})
	if reasoning.Type != gjson.String {
		reasoning = alias
	}
	if reasoning.Type == gjson.String && reasoning.Str != "" {
		dst = s.reasoningText(dst, reasoning)
	}
	if blocks.IsArray() {
		dst = s.thinking(dst, blocks)
	}
	if content.Type == gjson.String && content.Str != "" {
		var lp gjson.Result
		if s.x.r.includeLogprobs {
			lp = logprobs.Get("content")
		}
		dst = s.text(dst, false, content, lp)
	}
	if annotations.IsArray() {
		dst = s.annotations(dst, annotations)
	}
	if refusal.Type == gjson.String && refusal.Str != "" {
		dst = s.text(dst, true, refusal, gjson.Result{})
	}
	if !calls.IsArray() {
		calls = gjson.Result{}
	}
	var failed bool
	calls.ForEach(func(_, tc gjson.Result) bool {
		dst, failed = s.toolCall(dst, tc)
		return !failed
	})
	if failed {
		return dst, nil
	}
	if finish.Type == gjson.String && finish.Str != "" {
		s.finish = finish.Str
		dst = s.closeAll(dst)
	}
	return dst, nil
}

// first sets *dst to v unless it is set: the first of duplicate keys wins.
func first(dst *gjson.Result, v gjson.Result) {
	if !dst.Exists() {
		*dst = v
	}
}

// Close ends the stream: after [DONE] or an error, nothing more; a hub
// stream that ended without either was cut off, and ends in
// response.failed.
// Ended implements providers.StreamEnder.
func (s *Stream) Ended() bool { return s.done }

var _ providers.StreamEnder = (*Stream)(nil)

func (s *Stream) Close(dst []byte) []byte {
	if s.done {
		return dst
	}
	return s.fail(dst, "server_error", "the provider's stream ended before the answer was complete")
}

// Usage implements providers.StreamTranslator: the usage the terminal
// event's Response carries; not Known before it, or when it carries none.
func (s *Stream) Usage() providers.Used { return s.x.used }

// Fail ends the stream with response.failed for an error the gateway met
// (the provider's stream translator failed, or the connection broke).
func (s *Stream) Fail(dst []byte, e *providers.Error) []byte {
	if s.done {
		return dst
	}
	code, msg := errorCodeOf(e.Code, e.Type, e.Message)
	return s.fail(dst, code, msg)
}

// errorCode maps a hub error object to a Responses error code (the codes
// Codex tells apart: rate_limit_exceeded, context_length_exceeded,
// insufficient_quota; else server_error) and its message.
func errorCode(e gjson.Result) (code, msg string) {
	return errorCodeOf(e.Get("code").Str, e.Get("type").Str, e.Get("message").Str)
}

func errorCodeOf(c, t, msg string) (code, message string) {
	if msg == "" {
		msg = "the provider reported an error"
	}
	switch {
	case c == "rate_limit_exceeded", c == "context_length_exceeded", c == "insufficient_quota", c == "invalid_prompt":
		return c, msg
	case t == "rate_limit_error", t == "tokens", t == "requests":
		return "rate_limit_exceeded", msg
	case t == "insufficient_quota":
		return "insufficient_quota", msg
	}
	return "server_error", msg
}

// begin appends the event line of an event of type typ and the data
// field's name, and returns the writer of its data; head writes the data's
// first members and end finishes the event.
func (s *Stream) begin(dst []byte, typ string) jsonw.Writer {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: "...)
	return jsonw.New(dst)
}

// head opens the data of an event of type typ and writes its type and
// sequence_number.
func (s *Stream) head(w *jsonw.Writer, typ string) jsonw.Object {
	o := w.Object()
	o.Str("type", typ)
	o.Int("sequence_number", s.seq)
	s.seq++
	return o
}

// end closes o, the data of the event w writes, and ends the event; start
// is the buffer before it. A misuse of the writer, a bug no input can
// cause, is not sent as broken JSON: the event becomes an error event.
func (s *Stream) end(w *jsonw.Writer, o jsonw.Object, start []byte) []byte {
	o.End()
	b, err := w.Finish()
	if err != nil {
		w := s.begin(start, "error")
		e := s.head(&w, "error")
		e.Str("code", "internal_error")
		e.Str("message", "the gateway failed to write its answer")
		e.Null("param")
		e.End()
		b, _ = w.Finish() // straight-line writing: no misuse
	}
	return append(b, "\n\n"...)
}

// itemRef writes item_id and output_index for it.
func (s *Stream) itemRef(o jsonw.Object, it *outItem) {
	o.Str("item_id", it.id)
	o.Int("output_index", int64(s.indexOf(it)))
}

func (s *Stream) indexOf(it *outItem) int {
	for i := len(s.items) - 1; i >= 0; i-- {
		if s.items[i] == it {
			return i
		}
	}
	return -1
}

// start sends response.created and response.in_progress.
func (s *Stream) start(dst []byte, model gjson.Result) []byte {
	s.started = true
	if model.Type == gjson.String {
		s.model = model.Str
	}
	res := s.result("in_progress")
	res.usage = usage{}
	for _, typ := range []string{"response.created", "response.in_progress"} {
		w := s.begin(dst, typ)
		o := s.head(&w, typ)
		s.x.writeResponse(o.Key("response"), &res, false)
		dst = s.end(&w, o, dst)
	}
	return dst
}

// result is the Response's state so far.
func (s *Stream) result(status string) result {
	return result{status: status, model: s.model, serviceTier: s.tier, items: s.items, usage: s.usage}
}

// addItem opens a new output item and sends response.output_item.added.
func (s *Stream) addItem(dst []byte, it *outItem) []byte {
	s.items = append(s.items, it)
	const typ = "response.output_item.added"
	w := s.begin(dst, typ)
	o := s.head(&w, typ)
	o.Int("output_index", int64(len(s.items)-1))
	writeItem(o.Key("item"), it, false)
	return s.end(&w, o, dst)
}

// itemDone sends response.output_item.done with the whole item.
func (s *Stream) itemDone(dst []byte, it *outItem) []byte {
	if it.kind != kindReasoning {
		it.status = "completed"
		if st, _ := statusOf(s.finish); st == "incomplete" && it == s.items[len(s.items)-1] {
			it.status = "incomplete"
		}
	}
	const typ = "response.output_item.done"
	w := s.begin(dst, typ)
	o := s.head(&w, typ)
	o.Int("output_index", int64(s.indexOf(it)))
	writeItem(o.Key("item"), it, s.x.r.includeEncrypted)
	return s.end(&w, o, dst)
}

// openReasoning opens a reasoning item, completing any other open item.
func (s *Stream) openReasoning(dst []byte) []byte {
	if s.reasoning != nil {
		return dst
	}
	dst = s.closeMessage(dst)
	dst = s.closeCall(dst)
	s.reasoning = &outItem{kind: kindReasoning, id: s.x.t.newID("rs_")}
	return s.addItem(dst, s.reasoning)
}

// reasoningText streams reasoning text (a JSON string) as the reasoning
// item's summary.
func (s *Stream) reasoningText(dst []byte, text gjson.Result) []byte {
	dst = s.openReasoning(dst)
	it := s.reasoning
	if len(it.summary) == 0 {
		it.summary = append(it.summary, nil)
		const typ = "response.reasoning_summary_part.added"
		w := s.begin(dst, typ)
		o := s.head(&w, typ)
		s.itemRef(o, it)
		o.Int("summary_index", 0)
		writeSummaryText(o.Key("part"), nil)
		dst = s.end(&w, o, dst)
	}
	it.summary[0] = append(it.summary[0], text.Str...)
	const typ = "response.reasoning_summary_text.delta"
	w := s.begin(dst, typ)
	o := s.head(&w, typ)
	s.itemRef(o, it)
	o.Int("summary_index", 0)
	o.Raw("delta", text.Raw)
	return s.end(&w, o, dst)
}

// thinking adds signed thinking blocks to the reasoning item; they go out
// as its encrypted_content in response.output_item.done.
func (s *Stream) thinking(dst []byte, blocks gjson.Result) []byte {
	blocks.ForEach(func(_, block gjson.Result) bool {
		if !validThinkingBlock(block) {
			return true
		}
		dst = s.openReasoning(dst)
		addCompact(&s.reasoning.thinking, block.Raw)
		return true
	})
	return dst
}

// closeReasoning completes the open reasoning item.
func (s *Stream) closeReasoning(dst []byte) []byte {
	it := s.reasoning
	if it == nil {
		return dst
	}
	s.reasoning = nil
	if len(it.summary) > 0 {
		const typ = "response.reasoning_summary_text.done"
		w := s.begin(dst, typ)
		o := s.head(&w, typ)
		s.itemRef(o, it)
		o.Int("summary_index", 0)
		o.Str("text", providers.InPlace(it.summary[0]))
		dst = s.end(&w, o, dst)
		const typ2 = "response.reasoning_summary_part.done"
		w = s.begin(dst, typ2)
		o = s.head(&w, typ2)
		s.itemRef(o, it)
		o.Int("summary_index", 0)
		writeSummaryText(o.Key("part"), it.summary[0])
		dst = s.end(&w, o, dst)
	}
	return s.itemDone(dst, it)
}

// text streams answer text (or, refusal, a refusal), a JSON string, into
// the message.
func (s *Stream) text(dst []byte, refusal bool, text, logprobs gjson.Result) []byte {
	dst = s.closeReasoning(dst)
	dst = s.closeCall(dst)
	m := s.message
	if m == nil {
		m = &outItem{kind: kindMessage, id: s.x.t.newID("msg_"), status: "in_progress"}
		s.message = m
		dst = s.addItem(dst, m)
	}
	var p *outPart
	if n := len(m.parts); n > 0 && m.parts[n-1].refusal == refusal {
		p = m.parts[n-1]
	} else {
		dst = s.closePart(dst)
		p = &outPart{refusal: refusal}
		m.parts = append(m.parts, p)
		const typ = "response.content_part.added"
		w := s.begin(dst, typ)
		o := s.head(&w, typ)
		s.partRef(o)
		writePart(o.Key("part"), p)
		dst = s.end(&w, o, dst)
	}
	p.text = append(p.text, text.Str...)
	if refusal {
		const typ = "response.refusal.delta"
		w := s.begin(dst, typ)
		o := s.head(&w, typ)
		s.partRef(o)
		o.Raw("delta", text.Raw)
		return s.end(&w, o, dst)
	}
	s.scratch.Reset()
	if s.x.r.includeLogprobs {
		if !logprobs.IsArray() {
			logprobs = gjson.Result{}
		}
		logprobs.ForEach(func(_, lp gjson.Result) bool {
			addLogprob(&s.scratch, lp)
			return true
		})
		p.logprobs.Extend(&s.scratch)
	}
	const typ = "response.output_text.delta"
	w := s.begin(dst, typ)
	o := s.head(&w, typ)
	s.partRef(o)
	o.Raw("delta", text.Raw)
	lps := o.Array("logprobs")
	lps.List(&s.scratch)
	lps.End()
	return s.end(&w, o, dst)
}

// partRef writes the reference to the message's last part.
func (s *Stream) partRef(o jsonw.Object) {
	s.itemRef(o, s.message)
	o.Int("content_index", int64(len(s.message.parts)-1))
}

// annotations adds url_citation annotations to the message's text part.
func (s *Stream) annotations(dst []byte, list gjson.Result) []byte {
	m := s.message
	if m == nil || len(m.parts) == 0 || m.parts[len(m.parts)-1].refusal {
		return dst
	}
	p := m.parts[len(m.parts)-1]
	list.ForEach(func(_, a gjson.Result) bool {
		if !p.addAnnotation(a) {
			return true
		}
		const typ = "response.output_text.annotation.added"
		w := s.begin(dst, typ)
		o := s.head(&w, typ)
		s.partRef(o)
		o.Int("annotation_index", int64(p.annotations.Len()-1))
		writeAnnotation(o.Key("annotation"), a.Get("url_citation"))
		dst = s.end(&w, o, dst)
		return true
	})
	return dst
}

// closePart completes the message's last part.
func (s *Stream) closePart(dst []byte) []byte {
	m := s.message
	if m == nil || len(m.parts) == 0 {
		return dst
	}
	p := m.parts[len(m.parts)-1]
	if p.refusal {
		const typ = "response.refusal.done"
		w := s.begin(dst, typ)
		o := s.head(&w, typ)
		s.partRef(o)
		o.Str("refusal", providers.InPlace(p.text))
		dst = s.end(&w, o, dst)
	} else {
		const typ = "response.output_text.done"
		w := s.begin(dst, typ)
		o := s.head(&w, typ)
		s.partRef(o)
		o.Str("text", providers.InPlace(p.text))
		lps := o.Array("logprobs")
		lps.List(&p.logprobs)
		lps.End()
		dst = s.end(&w, o, dst)
	}
	const typ = "response.content_part.done"
	w := s.begin(dst, typ)
	o := s.head(&w, typ)
	s.partRef(o)
	writePart(o.Key("part"), p)
	return s.end(&w, o, dst)
}

// closeMessage completes the open message item.
func (s *Stream) closeMessage(dst []byte) []byte {
	if s.message == nil {
		return dst
	}
	dst = s.closePart(dst)
	m := s.message
	s.message = nil
	return s.itemDone(dst, m)
}

// toolCall streams one tool_calls delta. A fragment of a call already
// completed (an upstream that interleaves calls) cannot be expressed once
// that call's output_item.done went out, and fails the stream.
func (s *Stream) toolCall(dst []byte, tc gjson.Result) ([]byte, bool) {
	index := tc.Get("index").Int()
	var c *call
	for _, k := range s.calls {
		if k.index == index {
			c = k
			break
		}
	}
	if c == nil {
		dst = s.closeReasoning(dst)
		dst = s.closeMessage(dst)
		dst = s.closeCall(dst)
		id := tc.Get("id").Str
		if id == "" {
			id = s.x.t.newID("call_")
		}
		c = &call{index: index, dec: newInputDecoder()}
		c.item = &outItem{callID: id}
		s.calls = append(s.calls, c)
		s.cur = c
	} else if c.closed {
		return s.fail(dst, "server_error", "the provider's stream interleaved the arguments of several tool calls"), true
	}
	if name := tc.Get("function.name").Str; name != "" && !c.announced {
		c.item.name += name
	}
	args := tc.Get("function.arguments").Str
	if !c.announced {
		if c.item.name == "" {
			c.item.args = append(c.item.args, args...) // wait for the name
			return dst, false
		}
		dst = s.announce(dst, c)
	}
	return s.callArgs(dst, c, args), false
}

// announce sends output_item.added for a call whose name is known, and the
// arguments that came before it.
func (s *Stream) announce(dst []byte, c *call) []byte {
	c.announced = true
	early := string(c.item.args)
	it := s.x.newCall(c.item.callID, c.item.name)
	it.status = "in_progress"
	c.item = it
	dst = s.addItem(dst, it)
	return s.callArgs(dst, c, early)
}

// callArgs streams a fragment of a call's arguments.
func (s *Stream) callArgs(dst []byte, c *call, args string) []byte {
	if args == "" {
		return dst
	}
	it := c.item
	if it.kind == kindToolSearch {
		// Its arguments are an object, whole in output_item.done.
		it.args = append(it.args, args...)
		return dst
	}
	if it.kind == kindFunction {
		it.args = append(it.args, args...)
		const typ = "response.function_call_arguments.delta"
		w := s.begin(dst, typ)
		o := s.head(&w, typ)
		s.itemRef(o, it)
		o.Str("delta", args)
		return s.end(&w, o, dst)
	}
	// A custom tool: the arguments are {"input":"…"}; stream the input.
	it.args = append(it.args, args...)
	n := len(c.sent)
	c.sent = c.dec.feed(c.sent, args)
	return s.inputDelta(dst, c, c.sent[n:])
}

// inputDelta sends a custom tool call's input delta, unless it is empty.
func (s *Stream) inputDelta(dst []byte, c *call, delta []byte) []byte {
	if len(delta) == 0 {
		return dst
	}
	const typ = "response.custom_tool_call_input.delta"
	w := s.begin(dst, typ)
	o := s.head(&w, typ)
	s.itemRef(o, c.item)
	o.Str("delta", providers.InPlace(delta))
	return s.end(&w, o, dst)
}

// closeCall completes the open tool call.
func (s *Stream) closeCall(dst []byte) []byte {
	c := s.cur
	if c == nil {
		return dst
	}
	s.cur = nil
	c.closed = true
	if !c.announced {
		dst = s.announce(dst, c)
	}
	it := c.item
	if it.kind == kindToolSearch {
		return s.itemDone(dst, it)
	}
	if it.kind == kindFunction {
		const typ = "response.function_call_arguments.done"
		w := s.begin(dst, typ)
		o := s.head(&w, typ)
		s.itemRef(o, it)
		o.Str("name", it.name)
		o.Str("arguments", providers.InPlace(it.args))
		dst = s.end(&w, o, dst)
		return s.itemDone(dst, it)
	}
	// The item's args so far are the raw arguments; from here on they are
	// the input.
	if c.dec.streaming() {
		n := len(c.sent)
		c.sent = c.dec.finish(c.sent)
		dst = s.inputDelta(dst, c, c.sent[n:])
	} else {
		input := customInput(string(it.args))
		c.sent = append(c.sent[:0], input...)
		dst = s.inputDelta(dst, c, c.sent)
	}
	it.args = c.sent
	const typ = "response.custom_tool_call_input.done"
	w := s.begin(dst, typ)
	o := s.head(&w, typ)
	s.itemRef(o, it)
	o.Str("input", providers.InPlace(it.args))
	dst = s.end(&w, o, dst)
	return s.itemDone(dst, it)
}

// closeAll completes every open item.
func (s *Stream) closeAll(dst []byte) []byte {
	dst = s.closeReasoning(dst)
	dst = s.closeMessage(dst)
	return s.closeCall(dst)
}

// complete ends a whole answer with response.completed, or
// response.incomplete when it stopped at the token limit or a filter.
func (s *Stream) complete(dst []byte) []byte {
	if !s.started {
		dst = s.start(dst, gjson.Result{})
	}
	dst = s.closeAll(dst)
	s.done = true
	status, reason := statusOf(s.finish)
	res := s.result(status)
	res.incomplete = reason
	res.completedAt = s.x.t.now().Unix()
	return s.terminal(dst, "response."+status, &res)
}

// fail ends the stream with response.failed. Items still open stay as
// they are, incomplete, with no .done events.
func (s *Stream) fail(dst []byte, code, msg string) []byte {
	if !s.started {
		dst = s.start(dst, gjson.Result{})
	}
	s.done = true
	for _, it := range s.items {
		if it.status == "in_progress" {
			it.status = "incomplete"
		}
	}
	if s.cur != nil && !s.cur.announced {
		s.cur = nil // a call without a name never became an item
	}
	res := s.result("failed")
	res.errCode, res.errMsg = code, msg
	return s.terminal(dst, "response.failed", &res)
}

// terminal sends the terminal event with the whole Response and keeps the
// Response for the record.
func (s *Stream) terminal(dst []byte, typ string, res *result) []byte {
	s.x.used = res.usage.used()
	var err error
	if s.x.final, err = s.x.appendResponse(s.x.final[:0], res, true); err != nil {
		s.x.final = nil
	}
	w := s.begin(dst, typ)
	o := s.head(&w, typ)
	if s.x.r.includeEncrypted && s.x.final != nil {
		o.Raw("response", providers.InPlace(s.x.final))
	} else {
		s.x.writeResponse(o.Key("response"), res, false)
	}
	return s.end(&w, o, dst)
}
