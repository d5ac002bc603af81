package responses

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// Exchange is one create request being served: its hub request, and the
// translation of the hub's answer (Response, or Stream for a streamed one)
// into the Response the client gets and the record the gateway stores.
// An Exchange serves one answer and is not safe for concurrent use.
type Exchange struct {
	t         Translator
	r         *Request
	id        string
	createdAt int64

	chat  []byte // the hub request
	input []byte // the conversation's input items, normalised, when storing

	// The request's echo in the Response, in four pieces around the parts
	// that change (model, output, service_tier, usage).
	echoA, echoB, echoC, echoD []byte

	final []byte // the complete Response, encrypted_content and all
}

// New translates a parsed create request into a hub chat request.
// history is the stored conversation it continues (History of the
// previous response's record) or nil; its items come after the
// instructions, before the request's input. The only errors that history
// can add: an item_reference to no item (400), and a history that cannot
// be read (500).
func (t Translator) New(r *Request, history []byte) (*Exchange, error) {
	x := &Exchange{t: t, r: r, id: t.newID("resp_"), createdAt: t.now().Unix()}
	if err := x.buildChat(history); err != nil {
		return nil, err
	}
	x.buildEcho()
	return x, nil
}

// ID is the id of the Response ("resp_…").
func (x *Exchange) ID() string { return x.id }

// Info is the request's Info.
func (x *Exchange) Info() Info { return x.r.Info() }

// ChatBody is the hub (unified chat) request. It names the model as the
// client did; a streamed request asks for usage (include_usage), which
// response.completed carries.
func (x *Exchange) ChatBody() []byte { return x.chat }

// Record is what the gateway keeps for a stored response (Info.Store),
// once Response or the stream has produced the final Response: the
// conversation's input items (the previous conversation's included) and
// the Response with every reasoning item's encrypted_content, whatever
// include asked. It is nil before then, and when store is false.
// Its layout is {"input":[items],"response":{Response}}.
func (x *Exchange) Record() []byte {
	if x.final == nil || !x.r.Info().Store {
		return nil
	}
	b := make([]byte, 0, len(x.input)+len(x.final)+32)
	b = append(b, `{"input":`...)
	if x.input == nil {
		b = append(b, "[]"...)
	} else {
		b = append(b, x.input...)
	}
	b = append(b, `,"response":`...)
	b = append(b, x.final...)
	return append(b, '}')
}

// buildChat writes the hub request.
func (x *Exchange) buildChat(history []byte) error {
	r := x.r
	c := chatBuilder{x: x, storing: r.Info().Store}
	c.b = make([]byte, 0, r.size+len(history)/2+256)
	c.b = append(c.b, `{"model":`...)
	c.b = append(c.b, r.model.Raw...)
	c.b = append(c.b, `,"messages":[`...)
	instructions := 0
	if r.instructions.Type == gjson.String && r.instructions.Str != "" {
		instructions = 1
		c.open()
		c.b = append(c.b, `{"role":"system","content":`...)
		c.b = append(c.b, r.instructions.Raw...)
		c.b = append(c.b, '}')
	}
	if c.storing {
		c.store = append(make([]byte, 0, r.size+len(history)+256), '[')
	}

	if len(history) > 0 {
		if !providers.ValidJSON(history) || !gjson.ParseBytes(history).IsArray() {
			return storedError()
		}
		var err error
		gjson.ParseBytes(history).ForEach(func(_, it gjson.Result) bool {
			const p = "previous_response_id"
			if checkItem(p, it) != nil {
				err = storedError()
				return false
			}
			err = c.item(p, it, true)
			return err == nil
		})
		if err != nil {
			return err
		}
	}

	switch in := r.input; {
	case in.Type == gjson.String:
		c.flushTurn()
		c.flushImages()
		c.open()
		c.b = append(c.b, `{"role":"user","content":`...)
		c.b = append(c.b, in.Raw...)
		c.b = append(c.b, '}')
		if c.storing {
			c.storeSep()
			c.store = append(c.store, `{"id":`...)
			c.store = providers.AppendString(c.store, x.t.newID("msg_"))
			c.store = append(c.store, `,"type":"message","role":"user","status":"completed","content":[{"type":"input_text","text":`...)
			c.store = providers.AppendCompactJSON(c.store, in.Raw)
			c.store = append(c.store, "}]}"...)
		}
	case in.IsArray():
		var err error
		i := 0
		in.ForEach(func(_, it gjson.Result) bool {
			err = c.item("input["+strconv.Itoa(i)+"]", it, false)
			i++
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	c.flushTurn()
	c.flushImages()
	if msgs := c.n - instructions; msgs == 0 {
		return invalid("input", "input must hold at least one message or tool output")
	}
	c.b = append(c.b, ']')
	if c.storing {
		x.input = append(c.store, ']')
	}

	b := x.appendTools(c.b)
	if f := r.text.Get("format"); f.IsObject() {
		switch f.Get("type").Str {
		case "json_object":
			b = append(b, `,"response_format":{"type":"json_object"}`...)
		case "json_schema":
			b = append(b, `,"response_format":{"type":"json_schema","json_schema":{"name":`...)
			b = append(b, f.Get("name").Raw...)
			b = append(b, `,"schema":`...)
			b = append(b, f.Get("schema").Raw...)
			if s := f.Get("strict"); providers.IsBool(s) {
				b = append(b, `,"strict":`...)
				b = append(b, s.Raw...)
			}
			if d := f.Get("description"); d.Type == gjson.String {
				b = append(b, `,"description":`...)
				b = append(b, d.Raw...)
			}
			b = append(b, "}}"...)
		}
	}
	if v := r.text.Get("verbosity"); v.Type == gjson.String {
		b = append(b, `,"verbosity":`...)
		b = append(b, v.Raw...)
	}
	if e := r.reasoning.Get("effort"); e.Type == gjson.String {
		b = append(b, `,"reasoning_effort":"`...)
		b = append(b, hubEffort(e.Str)...)
		b = append(b, '"')
	}
	b = appendNumber(b, "max_completion_tokens", r.maxOutputTokens)
	b = appendNumber(b, "temperature", r.temperature)
	b = appendNumber(b, "top_p", r.topP)
	for _, f := range []struct {
		name string
		v    gjson.Result
	}{
		{"user", r.user}, {"safety_identifier", r.safetyIdentifier}, {"prompt_cache_key", r.promptCacheKey},
		{"prompt_cache_retention", r.promptCacheRetention}, {"service_tier", r.serviceTier},
	} {
		if f.v.Type == gjson.String {
			b = append(b, `,"`...)
			b = append(b, f.name...)
			b = append(b, `":`...)
			b = append(b, f.v.Raw...)
		}
	}
	if r.includeLogprobs {
		b = append(b, `,"logprobs":true`...)
		b = appendNumber(b, "top_logprobs", r.topLogprobs)
	}
	if r.stream.Type == gjson.True {
		b = append(b, `,"stream":true,"stream_options":{"include_usage":true}`...)
	}
	x.chat = append(b, '}')
	return nil
}

// storedError is the error for a stored conversation the gateway cannot
// read back.
func storedError() *providers.Error {
	return &providers.Error{Status: http.StatusInternalServerError, Type: "server_error",
		Param: "previous_response_id", Message: "the stored conversation of previous_response_id cannot be read"}
}

// hubEffort maps a Responses reasoning effort to the hub's reasoning_effort,
// which stops at high.
func hubEffort(e string) string {
	switch e {
	case "xhigh", "max":
		return "high"
	}
	return e
}

// appendNumber appends ,"name":v when v is a number.
func appendNumber(b []byte, name string, v gjson.Result) []byte {
	if v.Type != gjson.Number {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return append(b, v.Raw...)
}

// appendTools appends the hub's tools, tool_choice and parallel_tool_calls.
func (x *Exchange) appendTools(b []byte) []byte {
	r := x.r
	n := 0
	for i := range r.toolList {
		if !r.send[i] {
			continue
		}
		if n == 0 {
			b = append(b, `,"tools":[`...)
		} else {
			b = append(b, ',')
		}
		n++
		t := &r.toolList[i]
		b = append(b, `{"type":"function","function":{"name":`...)
		b = append(b, t.nameV.Raw...)
		if t.custom {
			b = append(b, `,"description":`...)
			b = providers.AppendString(b, customDescription(t))
			b = append(b, `,"parameters":{"type":"object","properties":{"`+CustomInputParam+
				`":{"type":"string","description":"The tool's whole input, as free-form text."}},"required":["`+
				CustomInputParam+`"],"additionalProperties":false}}}`...)
			continue
		}
		if d := t.description; d.Type == gjson.String {
			b = append(b, `,"description":`...)
			b = append(b, d.Raw...)
		}
		if p := t.parameters; p.IsObject() {
			b = append(b, `,"parameters":`...)
			b = append(b, p.Raw...)
		}
		if s := t.strict; providers.IsBool(s) {
			b = append(b, `,"strict":`...)
			b = append(b, s.Raw...)
		}
		b = append(b, "}}"...)
	}
	if n == 0 {
		return b
	}
	b = append(b, ']')
	if r.choice != "" {
		b = append(b, `,"tool_choice":`...)
		b = append(b, r.choice...)
	}
	if providers.IsBool(r.parallelToolCalls) {
		b = append(b, `,"parallel_tool_calls":`...)
		b = append(b, r.parallelToolCalls.Raw...)
	}
	return b
}

// customDescription is the description of the function a custom tool
// becomes: its own, then how to pass its free-form input and the grammar
// that input follows.
func customDescription(t *tool) string {
	var sb strings.Builder
	if d := t.description.Str; d != "" {
		sb.WriteString(d)
		sb.WriteString("\n\n")
	}
	sb.WriteString(`This tool takes free-form text, not JSON arguments: put the whole text in the "` +
		CustomInputParam + `" parameter.`)
	if f := t.format; f.Get("type").Str == "grammar" {
		if f.Get("syntax").Str == "regex" {
			sb.WriteString(" The text must match this regular expression:\n\n")
		} else {
			sb.WriteString(" The text must match this Lark grammar:\n\n")
		}
		sb.WriteString(f.Get("definition").Str)
	}
	return sb.String()
}

// chatBuilder writes the hub's messages from input items. Items of one
// assistant turn (reasoning, assistant messages, function and custom tool
// calls) gather into one assistant message; images that tool outputs
// return go into a user message after those outputs, since a tool message
// carries only text.
type chatBuilder struct {
	x    *Exchange
	b    []byte
	n    int // messages written
	turn turn

	images  []byte // pending user content parts from tool outputs
	nImages int

	storing bool
	store   []byte // the normalised input items, when storing
	nStore  int

	// seen holds the items seen so far, for item_reference.
	seen []gjson.Result
}

// turn is the assistant turn being gathered.
type turn struct {
	open      bool
	parts     []turnPart
	calls     []byte
	nCalls    int
	reasoning []byte // reasoning text (summaries), JSON-unescaped
	thinking  []byte // thinking blocks, comma-separated
}

type turnPart struct {
	refusal bool
	text    string // a raw JSON string
}

// open starts a message in the hub's messages array.
func (c *chatBuilder) open() {
	if c.n > 0 {
		c.b = append(c.b, ',')
	}
	c.n++
}

func (c *chatBuilder) storeSep() {
	if c.nStore > 0 {
		c.store = append(c.store, ',')
	}
	c.nStore++
}

// item translates one item; p names it in errors. Items of the history are
// stored as they are (they are stored items already).
func (c *chatBuilder) item(p string, it gjson.Result, fromHistory bool) error {
	c.seen = append(c.seen, it)
	typ := itemType(it)
	if typ == "item_reference" {
		ref, ok := c.lookup(it.Get("id").Str)
		if !ok {
			return invalid(p+".id", "no item with id "+strconv.Quote(it.Get("id").Str)+" in this conversation (item_reference resolves items of the input and of the previous_response_id conversation)")
		}
		if itemType(ref) == "item_reference" {
			return invalid(p+".id", "an item_reference must name an item, not another reference")
		}
		it, typ = ref, itemType(ref)
	}
	if c.storing {
		c.storeSep()
		if fromHistory {
			c.store = providers.AppendCompactJSON(c.store, it.Raw)
		} else {
			c.store = c.x.appendNormalized(c.store, it, typ)
		}
	}
	switch typ {
	case "message":
		role := it.Get("role").Str
		if role == "assistant" {
			c.flushImages()
			c.assistantContent(it.Get("content"))
			return nil
		}
		c.flushTurn()
		c.flushImages()
		c.message(role, it.Get("content"))
	case "function_call":
		c.flushImages()
		c.call(it.Get("call_id"), it.Get("name"), it.Get("arguments").Raw)
	case "custom_tool_call":
		c.flushImages()
		args := append(make([]byte, 0, len(it.Get("input").Raw)+16), `{"`+CustomInputParam+`":`...)
		args = append(args, it.Get("input").Raw...)
		args = append(args, '}')
		c.call(it.Get("call_id"), it.Get("name"), string(providers.AppendString(nil, string(args))))
	case "function_call_output", "custom_tool_call_output":
		c.flushTurn()
		c.toolOutput(it.Get("call_id"), it.Get("output"))
	case "reasoning":
		c.flushImages()
		c.reasoning(it)
	}
	return nil
}

// lookup finds an item by id among the items seen so far.
func (c *chatBuilder) lookup(id string) (gjson.Result, bool) {
	for i := len(c.seen) - 1; i >= 0; i-- {
		if v := c.seen[i].Get("id"); v.Type == gjson.String && v.Str == id && itemType(c.seen[i]) != "item_reference" {
			return c.seen[i], true
		}
	}
	return gjson.Result{}, false
}

// message writes a user, system or developer message.
func (c *chatBuilder) message(role string, content gjson.Result) {
	c.open()
	c.b = append(c.b, `{"role":"`...)
	c.b = append(c.b, role...)
	c.b = append(c.b, `","content":`...)
	if content.Type == gjson.String {
		c.b = append(c.b, content.Raw...)
		c.b = append(c.b, '}')
		return
	}
	c.b = append(c.b, '[')
	n := 0
	content.ForEach(func(_, part gjson.Result) bool {
		if n > 0 {
			c.b = append(c.b, ',')
		}
		n++
		c.b = appendHubPart(c.b, part)
		return true
	})
	c.b = append(c.b, "]}"...)
}

// appendHubPart appends the hub's form of a text, image or file part.
func appendHubPart(b []byte, part gjson.Result) []byte {
	switch part.Get("type").Str {
	case "input_image":
		b = append(b, `{"type":"image_url","image_url":{"url":`...)
		b = append(b, part.Get("image_url").Raw...)
		if d := part.Get("detail"); d.Type == gjson.String {
			b = append(b, `,"detail":`...)
			b = append(b, d.Raw...)
		}
		return append(b, "}}"...)
	case "input_file":
		b = append(b, `{"type":"file","file":{"file_data":`...)
		b = append(b, part.Get("file_data").Raw...)
		if f := part.Get("filename"); f.Type == gjson.String {
			b = append(b, `,"filename":`...)
			b = append(b, f.Raw...)
		}
		return append(b, "}}"...)
	default: // input_text, output_text
		b = append(b, `{"type":"text","text":`...)
		b = append(b, part.Get("text").Raw...)
		return append(b, '}')
	}
}

// startTurn opens the assistant turn if none is open.
func (c *chatBuilder) startTurn() {
	c.turn.open = true
}

// assistantContent adds an assistant message's content to the turn.
func (c *chatBuilder) assistantContent(content gjson.Result) {
	c.startTurn()
	if content.Type == gjson.String {
		c.turn.parts = append(c.turn.parts, turnPart{text: content.Raw})
		return
	}
	content.ForEach(func(_, part gjson.Result) bool {
		if part.Get("type").Str == "refusal" {
			c.turn.parts = append(c.turn.parts, turnPart{refusal: true, text: part.Get("refusal").Raw})
		} else {
			c.turn.parts = append(c.turn.parts, turnPart{text: part.Get("text").Raw})
		}
		return true
	})
}

// call adds a tool call to the turn; args is a raw JSON string.
func (c *chatBuilder) call(id, name gjson.Result, args string) {
	c.startTurn()
	t := &c.turn
	if t.nCalls > 0 {
		t.calls = append(t.calls, ',')
	}
	t.nCalls++
	t.calls = append(t.calls, `{"id":`...)
	t.calls = append(t.calls, id.Raw...)
	t.calls = append(t.calls, `,"type":"function","function":{"name":`...)
	t.calls = append(t.calls, name.Raw...)
	t.calls = append(t.calls, `,"arguments":`...)
	t.calls = append(t.calls, args...)
	t.calls = append(t.calls, "}}"...)
}

// reasoning adds a reasoning item to the turn: its summary (or, without
// one, its reasoning text) as reasoning_content, and the thinking blocks
// its encrypted_content holds. Reasoning after the turn's text, with no
// tool call yet, starts a new assistant message, which keeps the order of
// thinking and text (Anthropic joins the two messages into one turn).
func (c *chatBuilder) reasoning(it gjson.Result) {
	if c.turn.open && len(c.turn.parts) > 0 && c.turn.nCalls == 0 {
		c.flushTurn()
	}
	c.startTurn()
	t := &c.turn
	texts := it.Get("summary")
	if !texts.Get("0").Exists() {
		texts = it.Get("content")
	}
	texts.ForEach(func(_, part gjson.Result) bool {
		if s := part.Get("text").Str; s != "" {
			if len(t.reasoning) > 0 {
				t.reasoning = append(t.reasoning, "\n\n"...)
			}
			t.reasoning = append(t.reasoning, s...)
		}
		return true
	})
	if e := it.Get("encrypted_content"); e.Type == gjson.String {
		if blocks, ok := decodeEncrypted(e.Str); ok {
			if len(t.thinking) > 0 {
				t.thinking = append(t.thinking, ',')
			}
			t.thinking = append(t.thinking, blocks...)
		}
	}
}

// flushTurn writes the assistant turn gathered so far as one assistant
// message. A turn of reasoning alone is dropped: a chat message needs
// content or tool calls.
func (c *chatBuilder) flushTurn() {
	t := &c.turn
	if !t.open {
		return
	}
	if len(t.parts) == 0 && t.nCalls == 0 {
		c.resetTurn()
		return
	}
	c.open()
	c.b = append(c.b, `{"role":"assistant","content":`...)
	switch {
	case len(t.parts) == 0:
		c.b = append(c.b, "null"...)
	case len(t.parts) == 1 && !t.parts[0].refusal:
		c.b = append(c.b, t.parts[0].text...)
	default:
		c.b = append(c.b, '[')
		for i, p := range t.parts {
			if i > 0 {
				c.b = append(c.b, ',')
			}
			if p.refusal {
				c.b = append(c.b, `{"type":"refusal","refusal":`...)
			} else {
				c.b = append(c.b, `{"type":"text","text":`...)
			}
			c.b = append(c.b, p.text...)
			c.b = append(c.b, '}')
		}
		c.b = append(c.b, ']')
	}
	if t.nCalls > 0 {
		c.b = append(c.b, `,"tool_calls":[`...)
		c.b = append(c.b, t.calls...)
		c.b = append(c.b, ']')
	}
	if len(t.reasoning) > 0 {
		c.b = append(c.b, `,"reasoning_content":`...)
		c.b = providers.AppendString(c.b, string(t.reasoning))
	}
	if len(t.thinking) > 0 {
		c.b = append(c.b, `,"thinking_blocks":[`...)
		c.b = append(c.b, t.thinking...)
		c.b = append(c.b, ']')
	}
	c.b = append(c.b, '}')
	c.resetTurn()
}

func (c *chatBuilder) resetTurn() {
	t := &c.turn
	t.open = false
	t.parts = t.parts[:0]
	t.calls = t.calls[:0]
	t.nCalls = 0
	t.reasoning = t.reasoning[:0]
	t.thinking = t.thinking[:0]
}

// toolOutput writes a tool message for a function or custom tool call's
// output. Text parts become its content; images and files wait for the
// user message after the run of tool outputs.
func (c *chatBuilder) toolOutput(callID, out gjson.Result) {
	c.open()
	c.b = append(c.b, `{"role":"tool","tool_call_id":`...)
	c.b = append(c.b, callID.Raw...)
	c.b = append(c.b, `,"content":`...)
	if out.Type == gjson.String {
		c.b = append(c.b, out.Raw...)
		c.b = append(c.b, '}')
		return
	}
	var texts []string
	labelled := false
	out.ForEach(func(_, part gjson.Result) bool {
		switch part.Get("type").Str {
		case "input_image", "input_file":
			if c.nImages > 0 {
				c.images = append(c.images, ',')
			}
			if !labelled {
				labelled = true
				c.images = append(c.images, `{"type":"text","text":`...)
				c.images = providers.AppendString(c.images, "Output of tool call "+callID.Str+":")
				c.images = append(c.images, "},"...)
			}
			c.nImages++
			c.images = appendHubPart(c.images, part)
		default:
			texts = append(texts, part.Get("text").Raw)
		}
		return true
	})
	switch len(texts) {
	case 0:
		c.b = append(c.b, `""`...)
	case 1:
		c.b = append(c.b, texts[0]...)
	default:
		c.b = append(c.b, '[')
		for i, t := range texts {
			if i > 0 {
				c.b = append(c.b, ',')
			}
			c.b = append(c.b, `{"type":"text","text":`...)
			c.b = append(c.b, t...)
			c.b = append(c.b, '}')
		}
		c.b = append(c.b, ']')
	}
	c.b = append(c.b, '}')
}

// flushImages writes the images and files of the tool outputs before it
// as a user message.
func (c *chatBuilder) flushImages() {
	if c.nImages == 0 {
		return
	}
	c.open()
	c.b = append(c.b, `{"role":"user","content":[`...)
	c.b = append(c.b, c.images...)
	c.b = append(c.b, "]}"...)
	c.images = c.images[:0]
	c.nImages = 0
}
