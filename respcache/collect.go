package respcache

import (
	"bytes"
	"errors"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
	"github.com/modelgate/modelgate/providers/sse"
)

// A Collector rebuilds, from a streamed answer as the client received it
// (the bytes of its server-sent events, in the client's API), the answer
// the same request gives not streamed, for the cache to store: a
// chat.completion from chat chunks, a Message from Messages events, the
// Response of response.completed (or .incomplete). It holds the answer
// being built, never the events, and gives up on one larger than its
// limit. The host writes every byte it sends the client into it (it is an
// io.Writer that never fails) and asks for the Answer once the stream
// ended. A Collector serves one stream and is not safe for concurrent
// use.
type Collector struct {
	api   API
	limit int64
	size  int64
	buf   []byte // the start of an event not complete yet
	state collectState

	chat *chatAnswer
	msg  *messageAnswer
	resp []byte // the terminal Response
}

type collectState uint8

const (
	collecting collectState = iota
	complete                // the stream ended as its API ends a whole answer
	failed                  // an error event, or an event that cannot be read
	tooLarge
)

// Errors of Collector.Answer.
var (
	// ErrIncomplete: the stream did not end as a whole answer (it was
	// cut off, or ended with an error event). Such an answer is never
	// stored.
	ErrIncomplete = errors.New("respcache: the stream did not end with a complete answer")
)

// Collector returns a Collector for a stream of api whose answer may be
// stored: it gives up past the cache's MaxEntrySize.
func (c *Cache) Collector(api API) *Collector { return NewCollector(api, c.cfg.MaxEntrySize) }

// NewCollector returns a Collector for a stream of api (chat, Responses or
// Messages) that gives up on an answer above limit bytes (0: no limit).
// Other APIs do not stream: its Answer fails.
func NewCollector(api API, limit int64) *Collector {
	c := &Collector{api: api, limit: limit}
	switch api {
	case Chat:
		c.chat = new(chatAnswer)
	case Messages:
		c.msg = new(messageAnswer)
	case Responses:
	default:
		c.state = failed
	}
	return c
}

// Write reads the events in p, which continues what was written before.
// It never fails.
func (c *Collector) Write(p []byte) (int, error) {
	if c.state != collecting {
		return len(p), nil
	}
	rest := p
	if len(c.buf) > 0 {
		c.buf = append(c.buf, p...)
		rest = c.buf
	}
	for c.state == collecting {
		ev, r, ok := sse.Cut(rest)
		if !ok {
			break
		}
		rest = r
		c.event(ev)
	}
	if c.state == collecting {
		c.buf = append(c.buf[:0], rest...)
		c.grow(0)
	}
	return len(p), nil
}

// grow counts n more bytes of the answer and gives up past the limit; an
// event held incomplete counts too.
func (c *Collector) grow(n int) {
	c.size += int64(n)
	if c.limit > 0 && c.size+int64(len(c.buf)) > c.limit {
		c.state = tooLarge
		c.buf, c.chat, c.msg, c.resp = nil, nil, nil, nil
	}
}

// event reads one event: its lines, without the blank line.
func (c *Collector) event(ev []byte) {
	name, data := sse.Fields(ev)
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return // a comment, a keep-alive
	}
	switch c.api {
	case Chat:
		c.chatEvent(data)
	case Messages:
		c.messageEvent(string(name), data)
	case Responses:
		c.responseEvent(string(name), data)
	}
}

// Answer returns the rebuilt answer. u is what the host's meter counted:
// the usage of a chat answer whose stream carried none (the client did not
// ask for it). It fails with ErrIncomplete for a stream that did not end
// as a whole answer, with ErrTooLarge for one above the limit.
func (c *Collector) Answer(u Usage) ([]byte, error) {
	switch c.state {
	case tooLarge:
		return nil, ErrTooLarge
	case complete:
	default:
		return nil, ErrIncomplete
	}
	var body []byte
	var err error
	switch c.api {
	case Chat:
		body, err = c.chat.write(u)
	case Messages:
		body, err = c.msg.write()
	case Responses:
		body = c.resp
	}
	if err != nil {
		return nil, err
	}
	if c.limit > 0 && int64(len(body)) > c.limit {
		return nil, ErrTooLarge
	}
	return body, nil
}

// chatAnswer is a chat.completion being rebuilt from its chunks.
type chatAnswer struct {
	id, model, tier string // JSON literals, as the chunks wrote them
	created         int64
	choices         []*chatChoice
	usage           string // the usage chunk's object, compacted
}

type chatChoice struct {
	index                         int64
	content, refusal, reasoning   strings.Builder
	thinking, annotations, tokens []string // JSON values, compacted
	hasLogprobs                   bool
	calls                         []*chatCall
	finish                        string
}

type chatCall struct {
	index    int64
	id, name string
	args     strings.Builder
}

func (c *Collector) chatEvent(data []byte) {
	if string(data) == "[DONE]" {
		c.state = complete
		return
	}
	if !providers.ValidJSON(data) {
		c.state = failed
		return
	}
	v := gjson.ParseBytes(data)
	if e := v.Get("error"); !v.IsObject() || e.Exists() && e.Type != gjson.Null {
		c.state = failed
		return
	}
	a := c.chat
	if a.id == "" {
		a.id, a.model, a.created = v.Get("id").Raw, v.Get("model").Raw, v.Get("created").Int()
	}
	if t := v.Get("service_tier"); t.Type == gjson.String {
		a.tier = t.Str
	}
	if u := v.Get("usage"); u.IsObject() {
		a.usage = providers.CompactJSON(u.Raw)
	}
	v.Get("choices").ForEach(func(_, ch gjson.Result) bool {
		c.chatDelta(a.choice(ch.Get("index").Int()), ch)
		return c.state == collecting
	})
}

// choice returns the choice of index, made at its first chunk.
func (a *chatAnswer) choice(index int64) *chatChoice {
	for _, ch := range a.choices {
		if ch.index == index {
			return ch
		}
	}
	ch := &chatChoice{index: index}
	a.choices = append(a.choices, ch)
	return ch
}

// chatDelta adds one chunk's delta of a choice.
func (c *Collector) chatDelta(ch *chatChoice, v gjson.Result) {
	d := v.Get("delta")
	n := 0
	if s := d.Get("content"); s.Type == gjson.String {
		ch.content.WriteString(s.Str)
		n += len(s.Str)
	}
	if s := d.Get("refusal"); s.Type == gjson.String {
		ch.refusal.WriteString(s.Str)
		n += len(s.Str)
	}
	if s := d.Get("reasoning_content"); s.Type == gjson.String {
		ch.reasoning.WriteString(s.Str)
		n += len(s.Str)
	}
	d.Get("thinking_blocks").ForEach(func(_, b gjson.Result) bool {
		ch.thinking = append(ch.thinking, providers.CompactJSON(b.Raw))
		n += len(b.Raw)
		return true
	})
	d.Get("annotations").ForEach(func(_, an gjson.Result) bool {
		ch.annotations = append(ch.annotations, providers.CompactJSON(an.Raw))
		n += len(an.Raw)
		return true
	})
	d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		call := ch.call(tc.Get("index").Int())
		if id := tc.Get("id").Str; id != "" {
			call.id = id
		}
		fn := tc.Get("function")
		if name := fn.Get("name").Str; name != "" {
			call.name += name
		}
		call.args.WriteString(fn.Get("arguments").Str)
		n += len(tc.Raw)
		return true
	})
	if lp := v.Get("logprobs"); lp.IsObject() {
		ch.hasLogprobs = true
		lp.Get("content").ForEach(func(_, t gjson.Result) bool {
			ch.tokens = append(ch.tokens, providers.CompactJSON(t.Raw))
			n += len(t.Raw)
			return true
		})
	}
	if f := v.Get("finish_reason"); f.Type == gjson.String {
		ch.finish = f.Str
	}
	c.grow(n)
}

// call returns the tool call of index, made at its first delta.
func (ch *chatChoice) call(index int64) *chatCall {
	for _, c := range ch.calls {
		if c.index == index {
			return c
		}
	}
	c := &chatCall{index: index}
	ch.calls = append(ch.calls, c)
	return c
}

// write writes the chat.completion; u is the usage when the stream
// carried none.
func (a *chatAnswer) write(u Usage) ([]byte, error) {
	w := jsonw.New(nil)
	c := providers.StartCompletion(&w, providers.Head{ID: literal(a.id), Created: a.created, Model: literal(a.model)})
	slices.SortFunc(a.choices, func(x, y *chatChoice) int { return int(x.index - y.index) })
	for _, ch := range a.choices {
		m := c.Choice(ch.index)
		// A stream opens every choice with content "", whether the answer
		// has content or none (null).
		if ch.content.Len() > 0 {
			m.Content(jsonw.Plain(ch.content.String()))
		} else {
			m.NullContent()
		}
		if ch.refusal.Len() > 0 {
			m.Refusal(jsonw.Plain(ch.refusal.String()))
		} else {
			m.NullRefusal()
		}
		if ch.reasoning.Len() > 0 {
			m.Reasoning(jsonw.Plain(ch.reasoning.String()))
		}
		if len(ch.thinking) > 0 {
			tb := m.ThinkingBlocks()
			for _, b := range ch.thinking {
				tb.Raw(b)
			}
			tb.End()
		}
		if len(ch.calls) > 0 {
			slices.SortFunc(ch.calls, func(x, y *chatCall) int { return int(x.index - y.index) })
			tc := m.ToolCalls()
			for _, call := range ch.calls {
				tc.Call(jsonw.Plain(call.id), jsonw.Plain(call.name), jsonw.Plain(call.args.String()))
			}
			tc.End()
		}
		if len(ch.annotations) > 0 {
			m.Annotations("[" + strings.Join(ch.annotations, ",") + "]")
		}
		if !ch.hasLogprobs {
			m.End(ch.finish)
			continue
		}
		lp := m.Logprobs().Object()
		lp.Raw("content", "["+strings.Join(ch.tokens, ",")+"]")
		lp.Null("refusal")
		lp.End()
		m.Finish(ch.finish)
	}
	if a.usage != "" {
		c.UsageRaw(a.usage)
	} else {
		c.Usage(u.unified())
	}
	if a.tier != "" {
		c.ServiceTier(a.tier)
	}
	return c.Finish()
}

// literal is the JSON string literal s (as gjson's Raw holds it), or ""
// when s is not one.
func literal(s string) jsonw.Text {
	if len(s) >= 2 && s[0] == '"' {
		return jsonw.Lit(s)
	}
	return jsonw.Plain("")
}

// unified is u as the unified usage object writes it: the details where
// they are not zero.
func (u Usage) unified() providers.Usage {
	return providers.Usage{
		Prompt: u.Prompt, Completion: u.Completion, Total: u.Prompt + u.Completion,
		Cached: u.Cached, HasCached: u.Cached > 0,
		CacheWrite: u.CacheWrite, HasCacheWrite: u.CacheWrite > 0,
		CacheWrite1h: u.CacheWrite1h, HasCacheWrite1h: u.CacheWrite1h > 0,
		Reasoning: u.Reasoning, HasReasoning: u.Reasoning > 0,
	}
}

// messageAnswer is a Message being rebuilt from its events.
type messageAnswer struct {
	head     string // message_start's message, compacted
	blocks   []*messageBlock
	stop     string // message_delta's delta, compacted
	usage    []field
	started  bool
	finished bool // message_delta came
}

// field is a member of a JSON object: its key and its value, compacted.
type field struct{ key, value string }

type messageBlock struct {
	index                        int64
	start                        string // content_block_start's block, compacted
	typ                          string
	text, thinking, sig, input   strings.Builder
	hasText, hasThinking, inJSON bool
	citations                    []string
}

func (c *Collector) messageEvent(name string, data []byte) {
	if !providers.ValidJSON(data) {
		c.state = failed
		return
	}
	v := gjson.ParseBytes(data)
	typ := v.Get("type").Str
	if name == "" {
		name = typ
	}
	m := c.msg
	n := 0
	switch name {
	case "message_start":
		msg := v.Get("message")
		m.head, m.started = providers.CompactJSON(msg.Raw), true
		m.setUsage(msg.Get("usage"))
		n = len(m.head)
	case "content_block_start":
		b := &messageBlock{index: v.Get("index").Int()}
		cb := v.Get("content_block")
		b.start, b.typ = providers.CompactJSON(cb.Raw), cb.Get("type").Str
		m.blocks = append(m.blocks, b)
		n = len(b.start)
	case "content_block_delta":
		b := m.block(v.Get("index").Int())
		if b == nil {
			c.state = failed
			return
		}
		d := v.Get("delta")
		switch d.Get("type").Str {
		case "text_delta":
			b.text.WriteString(d.Get("text").Str)
			b.hasText = true
		case "thinking_delta":
			b.thinking.WriteString(d.Get("thinking").Str)
			b.hasThinking = true
		case "signature_delta":
			b.sig.WriteString(d.Get("signature").Str)
		case "input_json_delta":
			b.input.WriteString(d.Get("partial_json").Str)
			b.inJSON = true
		case "citations_delta":
			b.citations = append(b.citations, providers.CompactJSON(d.Get("citation").Raw))
		}
		n = len(d.Raw)
	case "message_delta":
		m.stop, m.finished = providers.CompactJSON(v.Get("delta").Raw), true
		m.setUsage(v.Get("usage"))
	case "message_stop":
		if m.started && m.finished {
			c.state = complete
		} else {
			c.state = failed
		}
	case "error":
		c.state = failed
	}
	c.grow(n)
}

// setUsage merges the members of a usage object into the message's:
// message_delta repeats or updates what message_start said.
func (m *messageAnswer) setUsage(u gjson.Result) {
	u.ForEach(func(k, x gjson.Result) bool {
		v := providers.CompactJSON(x.Raw)
		for i := range m.usage {
			if m.usage[i].key == k.Str {
				m.usage[i].value = v
				return true
			}
		}
		m.usage = append(m.usage, field{k.Str, v})
		return true
	})
}

func (m *messageAnswer) block(index int64) *messageBlock {
	for i := len(m.blocks) - 1; i >= 0; i-- {
		if m.blocks[i].index == index {
			return m.blocks[i]
		}
	}
	return nil
}

// write writes the Message: message_start's, its content the blocks, its
// stop reason and sequence message_delta's, its usage both merged.
func (m *messageAnswer) write() ([]byte, error) {
	w := jsonw.New(nil)
	o := w.Object()
	stop := gjson.Parse(m.stop)
	gjson.Parse(m.head).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "content":
			a := o.Array("content")
			slices.SortStableFunc(m.blocks, func(x, y *messageBlock) int { return int(x.index - y.index) })
			for _, b := range m.blocks {
				b.write(a.Value())
			}
			a.End()
		case "stop_reason", "stop_sequence":
			if s := stop.Get(k.Str); s.Exists() {
				o.Raw(k.Str, s.Raw)
			} else {
				o.Raw(k.Str, v.Raw)
			}
		case "usage":
			u := o.Object("usage")
			for _, f := range m.usage {
				u.Raw(f.key, f.value)
			}
			u.End()
		default:
			o.Raw(k.Str, v.Raw)
		}
		return true
	})
	o.End()
	return w.Finish()
}

// write writes the block: content_block_start's, with what its deltas
// added.
func (b *messageBlock) write(v jsonw.Value) {
	o := v.Object()
	gjson.Parse(b.start).ForEach(func(k, x gjson.Result) bool {
		switch {
		case k.Str == "text" && b.hasText:
			o.Str("text", x.Str+b.text.String())
		case k.Str == "citations" && len(b.citations) > 0:
			o.Raw("citations", "["+strings.Join(b.citations, ",")+"]")
		case k.Str == "thinking" && b.hasThinking:
			o.Str("thinking", x.Str+b.thinking.String())
		case k.Str == "signature" && b.sig.Len() > 0:
			o.Str("signature", b.sig.String())
		case k.Str == "input" && b.inJSON && providers.ValidJSON([]byte(b.input.String())):
			o.Compact("input", b.input.String())
		default:
			o.Raw(k.Str, x.Raw)
		}
		return true
	})
	if b.typ == "text" && len(b.citations) > 0 && !gjson.Get(b.start, "citations").Exists() {
		o.Raw("citations", "["+strings.Join(b.citations, ",")+"]")
	}
	o.End()
}

func (c *Collector) responseEvent(name string, data []byte) {
	if !providers.ValidJSON(data) {
		c.state = failed
		return
	}
	v := gjson.ParseBytes(data)
	if name == "" {
		name = v.Get("type").Str
	}
	switch name {
	case "response.completed", "response.incomplete":
		r := v.Get("response")
		if !r.IsObject() {
			c.state = failed
			return
		}
		c.resp = []byte(providers.CompactJSON(r.Raw))
		c.state = complete
		c.grow(len(c.resp))
	case "response.failed", "error":
		c.state = failed
	}
}
