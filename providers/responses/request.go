package responses

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
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
	// that change (model, output, service_tier, usage), and the misuse of
	// the writer that kept them from being written, if any.
	echoA, echoB, echoC, echoD jsonw.Members
	echoErr                    error

	final []byte         // the complete Response, encrypted_content and all
	used  providers.Used // the usage the Response carries (Used)

	// webSearch is the web search built-in the hub request asks for as
	// web_search_options; dropped lists the built-in tools left out.
	webSearch *builtin
	dropped   []string
}

// New translates a parsed create request into a hub chat request.
// history is the stored conversation it continues (History of the
// previous response's record) or nil; its items come after the
// instructions, before the request's input. The only errors that history
// can add: an item_reference to no item (400), and a history that cannot
// be read (500).
func (t Translator) New(r *Request, history []byte) (*Exchange, error) {
	x := &Exchange{t: t, r: r, id: t.newID("resp_"), createdAt: t.now().Unix()}
	if err := x.builtins(); err != nil {
		return nil, err
	}
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

// Used is what the answer used, as the final Response carries it (once
// Response or the stream's terminal event has produced it; not Known
// before, nor when the Response carries no usage).
func (x *Exchange) Used() providers.Used { return x.used }

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
	w := jsonw.New(make([]byte, 0, len(x.input)+len(x.final)+32))
	o := w.Object()
	if x.input == nil {
		o.Array("input").End()
	} else {
		o.Raw("input", providers.InPlace(x.input))
	}
	o.Raw("response", providers.InPlace(x.final))
	o.End()
	b, err := w.Finish()
	if err != nil {
		return nil
	}
	return b
}

// buildChat writes the hub request.
func (x *Exchange) buildChat(history []byte) error {
	r := x.r
	c := chatBuilder{x: x, storing: r.Info().Store}
	c.w = jsonw.New(make([]byte, 0, r.size+len(history)/2+256))
	o := c.w.Object()
	o.Raw("model", r.model.Raw)
	o.Key("messages")
	c.w.OpenArray()
	instructions := 0
	if r.instructions.Type == gjson.String && r.instructions.Str != "" {
		instructions = 1
		c.rawMessage("system", r.instructions.Raw)
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
		c.rawMessage("user", in.Raw)
		if c.storing {
			w := c.store.Begin()
			m := w.Object()
			m.Str("id", x.t.newID("msg_"))
			m.Str("type", "message")
			m.Str("role", "user")
			m.Str("status", "completed")
			content := m.Array("content")
			t := content.Object()
			t.Str("type", "input_text")
			t.Compact("text", in.Raw)
			t.End()
			content.End()
			m.End()
			if err := c.store.End(&w); err != nil {
				return err
			}
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
	c.w.CloseArray()
	if c.storing {
		w := jsonw.New(make([]byte, 0, c.store.Size()+2))
		a := w.Array()
		a.List(&c.store)
		a.End()
		var err error
		if x.input, err = w.Finish(); err != nil {
			return err
		}
	}

	x.writeTools(o)
	x.writeWebSearch(o)
	if f := r.text.Get("format"); f.IsObject() {
		switch f.Get("type").Str {
		case "json_object":
			rf := o.Object("response_format")
			rf.Str("type", "json_object")
			rf.End()
		case "json_schema":
			rf := o.Object("response_format")
			rf.Str("type", "json_schema")
			js := rf.Object("json_schema")
			js.Raw("name", f.Get("name").Raw)
			js.Raw("schema", f.Get("schema").Raw)
			if s := f.Get("strict"); providers.IsBool(s) {
				js.Raw("strict", s.Raw)
			}
			if d := f.Get("description"); d.Type == gjson.String {
				js.Raw("description", d.Raw)
			}
			js.End()
			rf.End()
		}
	}
	if v := r.text.Get("verbosity"); v.Type == gjson.String {
		o.Raw("verbosity", v.Raw)
	}
	if e := r.reasoning.Get("effort"); e.Type == gjson.String {
		o.Str("reasoning_effort", hubEffort(e.Str))
	}
	writeNumber(o, "max_completion_tokens", r.maxOutputTokens)
	writeNumber(o, "temperature", r.temperature)
	writeNumber(o, "top_p", r.topP)
	for _, f := range []struct {
		name string
		v    gjson.Result
	}{
		{"user", r.user}, {"safety_identifier", r.safetyIdentifier}, {"prompt_cache_key", r.promptCacheKey},
		{"prompt_cache_retention", r.promptCacheRetention}, {"service_tier", r.serviceTier},
	} {
		if f.v.Type == gjson.String {
			o.Raw(f.name, f.v.Raw)
		}
	}
	if r.includeLogprobs {
		o.Bool("logprobs", true)
		writeNumber(o, "top_logprobs", r.topLogprobs)
	}
	if r.stream.Type == gjson.True {
		o.Bool("stream", true)
		so := o.Object("stream_options")
		so.Bool("include_usage", true)
		so.End()
	}
	o.End()
	var err error
	x.chat, err = c.w.Finish()
	return err
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

// writeNumber writes the member name, v, when v is a number.
func writeNumber(o jsonw.Object, name string, v gjson.Result) {
	if v.Type == gjson.Number {
		o.Raw(name, v.Raw)
	}
}

// writeTools writes the hub's tools, tool_choice and parallel_tool_calls.
func (x *Exchange) writeTools(o jsonw.Object) {
	r := x.r
	n := 0
	var tools jsonw.Array
	for i := range r.toolList {
		if !r.send[i] {
			continue
		}
		if n++; n == 1 {
			tools = o.Array("tools")
		}
		t := &r.toolList[i]
		tool := tools.Object()
		tool.Str("type", "function")
		fn := tool.Object("function")
		fn.Str("name", t.hub)
		if t.search {
			writeSearchFunction(fn, t)
		} else if t.custom {
			fn.Str("description", customDescription(t))
			ps := fn.Object("parameters")
			ps.Str("type", "object")
			props := ps.Object("properties")
			in := props.Object(CustomInputParam)
			in.Str("type", "string")
			in.Str("description", "The tool's whole input, as free-form text.")
			in.End()
			props.End()
			req := ps.Array("required")
			req.Str(CustomInputParam)
			req.End()
			ps.Bool("additionalProperties", false)
			ps.End()
		} else {
			switch d, nd := t.description, t.nsDescription; {
			case nd.Type == gjson.String && nd.Str != "" && d.Type == gjson.String && d.Str != "":
				fn.Str("description", nd.Str+"\n\n"+d.Str)
			case d.Type == gjson.String:
				fn.Raw("description", d.Raw)
			case nd.Type == gjson.String:
				fn.Raw("description", nd.Raw)
			}
			if p := t.parameters; p.IsObject() {
				fn.Raw("parameters", p.Raw)
			}
			if s := t.strict; providers.IsBool(s) {
				fn.Raw("strict", s.Raw)
			}
		}
		fn.End()
		writeCacheControl(tool, t.v.Get("cache_control"))
		tool.End()
	}
	if n == 0 {
		return
	}
	tools.End()
	if r.choice != "" {
		o.Raw("tool_choice", r.choice)
	}
	if providers.IsBool(r.parallelToolCalls) {
		o.Raw("parallel_tool_calls", r.parallelToolCalls.Raw)
	}
}

// writeSearchFunction writes the description and parameters of the
// function the client-run tool_search becomes: the tool's own, or a
// query and a limit.
func writeSearchFunction(fn jsonw.Object, t *tool) {
	if d := t.description; d.Type == gjson.String {
		fn.Raw("description", d.Raw)
	} else {
		fn.Str("description", "Searches for more tools by what they do; the tools found can be called afterwards.")
	}
	if p := t.parameters; p.IsObject() {
		fn.Raw("parameters", p.Raw)
		return
	}
	ps := fn.Object("parameters")
	ps.Str("type", "object")
	props := ps.Object("properties")
	q := props.Object("query")
	q.Str("type", "string")
	q.End()
	l := props.Object("limit")
	l.Str("type", "number")
	l.End()
	props.End()
	req := ps.Array("required")
	req.Str("query")
	req.End()
	ps.End()
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
	w    jsonw.Writer // in the hub request's messages
	n    int          // messages written
	turn turn

	images jsonw.List // pending user content parts from tool outputs

	storing bool
	store   jsonw.List // the normalised input items, when storing

	// seen holds the items seen so far, for item_reference.
	seen []gjson.Result
}

// turn is the assistant turn being gathered.
type turn struct {
	open      bool
	parts     []turnPart
	calls     jsonw.List
	reasoning []byte     // reasoning text (summaries), JSON-unescaped
	thinking  jsonw.List // thinking blocks
}

type turnPart struct {
	refusal bool
	text    string // a raw JSON string
}

// next opens the next message of the hub's messages array.
func (c *chatBuilder) next() jsonw.Object {
	c.n++
	return c.w.Next().Object()
}

// rawMessage writes a message of role whose content is raw JSON.
func (c *chatBuilder) rawMessage(role, content string) {
	m := c.next()
	m.Str("role", role)
	m.Raw("content", content)
	m.End()
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
		w := c.store.Begin()
		if fromHistory {
			w.Value().Compact(it.Raw)
		} else {
			c.x.writeNormalized(w.Value(), it, typ)
		}
		if err := c.store.End(&w); err != nil {
			return err
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
		c.message(role, it.Get("content"), it.Get("cache_control"))
	case "function_call":
		c.flushImages()
		name := it.Get("name")
		if ns := it.Get("namespace"); ns.Type == gjson.String {
			name = jsonString(ns.Str + NamespaceSeparator + name.Str)
		}
		c.call(it.Get("call_id"), name, jsonw.Lit(it.Get("arguments").Raw))
	case "tool_search_call":
		c.flushImages()
		args := "{}"
		if a := it.Get("arguments"); a.IsObject() {
			args = a.Raw
		}
		w := jsonw.New(make([]byte, 0, len(args)+8))
		w.Value().Compact(args)
		b, err := w.Finish()
		if err != nil {
			return err
		}
		c.call(it.Get("call_id"), jsonString(toolSearchName), jsonw.Plain(providers.InPlace(b)))
	case "tool_search_output":
		c.flushTurn()
		out, err := foundTools(it.Get("tools"))
		if err != nil {
			return err
		}
		c.toolOutput(it.Get("call_id"), jsonString(out), it.Get("cache_control"))
	case "custom_tool_call":
		c.flushImages()
		w := jsonw.New(make([]byte, 0, len(it.Get("input").Raw)+16))
		args := w.Object()
		args.Raw(CustomInputParam, it.Get("input").Raw)
		args.End()
		b, err := w.Finish()
		if err != nil {
			return err
		}
		name := it.Get("name")
		if ns := it.Get("namespace"); ns.Type == gjson.String {
			name = jsonString(ns.Str + NamespaceSeparator + name.Str)
		}
		c.call(it.Get("call_id"), name, jsonw.Plain(providers.InPlace(b)))
	case "function_call_output", "custom_tool_call_output":
		c.flushTurn()
		c.toolOutput(it.Get("call_id"), it.Get("output"), it.Get("cache_control"))
	case "reasoning":
		c.flushImages()
		c.reasoning(it)
	}
	return nil
}

// jsonString is s as a JSON string value.
func jsonString(s string) gjson.Result {
	return gjson.Result{Type: gjson.String, Str: s, Raw: string(providers.AppendString(nil, s))}
}

// foundTools is the tool message for a tool_search output: the names
// and descriptions of the tools it found, which the hub request offers
// from then on, as {"tools":[{"name","description"}]}.
func foundTools(tools gjson.Result) (string, error) {
	w := jsonw.New(make([]byte, 0, 64+len(tools.Raw)/4))
	o := w.Object()
	list := o.Array("tools")
	var each func(ns string, t gjson.Result) bool
	each = func(ns string, t gjson.Result) bool {
		name := t.Get("name").Str
		switch t.Get("type").Str {
		case "namespace":
			t.Get("tools").ForEach(func(_, nt gjson.Result) bool { return each(name, nt) })
			return true
		case "function", "custom":
		default:
			return true
		}
		if ns != "" {
			name = ns + NamespaceSeparator + name
		}
		e := list.Object()
		e.Str("name", name)
		if d := t.Get("description"); d.Type == gjson.String {
			e.Raw("description", d.Raw)
		}
		e.End()
		return true
	}
	tools.ForEach(func(_, t gjson.Result) bool { return each("", t) })
	list.End()
	o.End()
	b, err := w.Finish()
	return string(b), err
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

// message writes a user, system or developer message, with the item's
// cache_control, a prompt caching marker for Claude, as the hub carries
// it.
func (c *chatBuilder) message(role string, content, cache gjson.Result) {
	m := c.next()
	m.Str("role", role)
	defer func() {
		writeCacheControl(m, cache)
		m.End()
	}()
	if content.Type == gjson.String {
		m.Raw("content", content.Raw)
		return
	}
	parts := m.Array("content")
	content.ForEach(func(_, part gjson.Result) bool {
		writeHubPart(parts.Value(), part)
		return true
	})
	parts.End()
}

// writeCacheControl writes cache_control for a prompt caching marker
// (Anthropic's, which clients of Claude put on input items, content parts
// and tools), and nothing otherwise. The hub carries it to the providers
// that cache what a request marks (Anthropic, Claude on Bedrock and
// Vertex); the others drop it.
func writeCacheControl(o jsonw.Object, cache gjson.Result) {
	if cache.IsObject() {
		o.Compact("cache_control", cache.Raw)
	}
}

// writeHubPart writes the hub's form of a text, image or file part, with
// its cache_control.
func writeHubPart(v jsonw.Value, part gjson.Result) {
	o := v.Object()
	defer func() {
		writeCacheControl(o, part.Get("cache_control"))
		o.End()
	}()
	switch part.Get("type").Str {
	case "input_image":
		o.Str("type", "image_url")
		iu := o.Object("image_url")
		iu.Raw("url", part.Get("image_url").Raw)
		if d := part.Get("detail"); d.Type == gjson.String {
			iu.Raw("detail", d.Raw)
		}
		iu.End()
	case "input_file":
		o.Str("type", "file")
		f := o.Object("file")
		f.Raw("file_data", part.Get("file_data").Raw)
		if fn := part.Get("filename"); fn.Type == gjson.String {
			f.Raw("filename", fn.Raw)
		}
		f.End()
	default: // input_text, output_text
		o.Str("type", "text")
		o.Raw("text", part.Get("text").Raw)
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

// call adds a tool call to the turn.
func (c *chatBuilder) call(id, name gjson.Result, args jsonw.Text) {
	c.startTurn()
	t := &c.turn
	w := t.calls.Begin()
	o := w.Object()
	o.Raw("id", id.Raw)
	o.Str("type", "function")
	fn := o.Object("function")
	fn.Raw("name", name.Raw)
	fn.Text("arguments", args)
	fn.End()
	o.End()
	_ = t.calls.End(&w) // straight-line writing: no misuse
}

// reasoning adds a reasoning item to the turn: its summary (or, without
// one, its reasoning text) as reasoning_content, and the thinking blocks
// its encrypted_content holds. Reasoning after the turn's text, with no
// tool call yet, starts a new assistant message, which keeps the order of
// thinking and text (Anthropic joins the two messages into one turn).
func (c *chatBuilder) reasoning(it gjson.Result) {
	if c.turn.open && len(c.turn.parts) > 0 && c.turn.calls.Len() == 0 {
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
		decodeEncrypted(e.Str, &t.thinking)
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
	if len(t.parts) == 0 && t.calls.Len() == 0 {
		c.resetTurn()
		return
	}
	m := c.next()
	m.Str("role", "assistant")
	switch {
	case len(t.parts) == 0:
		m.Null("content")
	case len(t.parts) == 1 && !t.parts[0].refusal:
		m.Raw("content", t.parts[0].text)
	default:
		parts := m.Array("content")
		for _, p := range t.parts {
			o := parts.Object()
			if p.refusal {
				o.Str("type", "refusal")
				o.Raw("refusal", p.text)
			} else {
				o.Str("type", "text")
				o.Raw("text", p.text)
			}
			o.End()
		}
		parts.End()
	}
	if t.calls.Len() > 0 {
		calls := m.Array("tool_calls")
		calls.List(&t.calls)
		calls.End()
	}
	if len(t.reasoning) > 0 {
		m.Str("reasoning_content", providers.InPlace(t.reasoning))
	}
	if t.thinking.Len() > 0 {
		blocks := m.Array("thinking_blocks")
		blocks.List(&t.thinking)
		blocks.End()
	}
	m.End()
	c.resetTurn()
}

func (c *chatBuilder) resetTurn() {
	t := &c.turn
	t.open = false
	t.parts = t.parts[:0]
	t.calls.Reset()
	t.reasoning = t.reasoning[:0]
	t.thinking.Reset()
}

// toolOutput writes a tool message for a function or custom tool call's
// output. Text parts become its content; images and files wait for the
// user message after the run of tool outputs.
func (c *chatBuilder) toolOutput(callID, out, cache gjson.Result) {
	m := c.next()
	m.Str("role", "tool")
	m.Raw("tool_call_id", callID.Raw)
	defer func() {
		writeCacheControl(m, cache)
		m.End()
	}()
	if out.Type == gjson.String {
		m.Raw("content", out.Raw)
		return
	}
	var texts []string
	labelled := false
	out.ForEach(func(_, part gjson.Result) bool {
		switch part.Get("type").Str {
		case "input_image", "input_file":
			if !labelled {
				labelled = true
				w := c.images.Begin()
				o := w.Object()
				o.Str("type", "text")
				o.Str("text", "Output of tool call "+callID.Str+":")
				o.End()
				_ = c.images.End(&w) // straight-line writing: no misuse
			}
			w := c.images.Begin()
			writeHubPart(w.Value(), part)
			_ = c.images.End(&w)
		default:
			texts = append(texts, part.Get("text").Raw)
		}
		return true
	})
	switch len(texts) {
	case 0:
		m.Str("content", "")
	case 1:
		m.Raw("content", texts[0])
	default:
		parts := m.Array("content")
		for _, t := range texts {
			o := parts.Object()
			o.Str("type", "text")
			o.Raw("text", t)
			o.End()
		}
		parts.End()
	}
}

// flushImages writes the images and files of the tool outputs before it
// as a user message.
func (c *chatBuilder) flushImages() {
	if c.images.Len() == 0 {
		return
	}
	m := c.next()
	m.Str("role", "user")
	parts := m.Array("content")
	parts.List(&c.images)
	parts.End()
	m.End()
	c.images.Reset()
}
