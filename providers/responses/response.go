package responses

import (
	"errors"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Kinds of output item.
type itemKind uint8

const (
	kindReasoning itemKind = iota
	kindMessage
	kindFunction
	kindCustom
	kindToolSearch // a call of the client-run tool_search
)

// outItem is one output item of a Response, as a stream builds it up or
// an answer gives it whole.
type outItem struct {
	kind   itemKind
	id     string
	status string // messages and calls: in_progress, completed, incomplete

	// reasoning
	summary  [][]byte   // the summary parts' text
	thinking jsonw.List // thinking blocks

	// message
	parts []*outPart

	// function and custom tool calls
	callID, name string
	namespace    string // a function's namespace, "" for none
	args         []byte // arguments (function, tool_search) or input (custom)
}

// outPart is a message's output_text or refusal part.
type outPart struct {
	refusal     bool
	text        []byte
	annotations jsonw.List
	logprobs    jsonw.List
}

// writeItem writes the item in its current state; encrypted says whether
// a reasoning item carries its encrypted_content.
func writeItem(v jsonw.Value, it *outItem, encrypted bool) {
	o := v.Object()
	o.Str("id", it.id)
	switch it.kind {
	case kindReasoning:
		o.Str("type", "reasoning")
		summary := o.Array("summary")
		for _, s := range it.summary {
			writeSummaryText(summary.Value(), s)
		}
		summary.End()
		if encrypted && it.thinking.Len() > 0 {
			writeEncrypted(o.Key("encrypted_content"), &it.thinking)
		}
	case kindMessage:
		o.Str("type", "message")
		o.Str("status", it.status)
		o.Str("role", "assistant")
		content := o.Array("content")
		for _, p := range it.parts {
			writePart(content.Value(), p)
		}
		content.End()
	case kindFunction:
		o.Str("type", "function_call")
		o.Str("status", it.status)
		o.Str("arguments", providers.InPlace(it.args))
		o.Str("call_id", it.callID)
		o.Str("name", it.name)
		if it.namespace != "" {
			o.Str("namespace", it.namespace)
		}
	case kindToolSearch:
		o.Str("type", "tool_search_call")
		o.Str("status", it.status)
		o.Str("call_id", it.callID)
		o.Str("execution", "client")
		writeSearchArguments(o, it.args, it.status == "completed")
	case kindCustom:
		o.Str("type", "custom_tool_call")
		o.Str("status", it.status)
		o.Str("call_id", it.callID)
		o.Str("name", it.name)
		if it.namespace != "" {
			o.Str("namespace", it.namespace)
		}
		o.Str("input", providers.InPlace(it.args))
	}
	o.End()
}

// writeSearchArguments writes a tool_search call's arguments, an
// object: the arguments the model gave when they are one (while they
// stream in, done is false and they are {} until then), else the text it
// gave as the query.
func writeSearchArguments(o jsonw.Object, args []byte, done bool) {
	a := gjson.ParseBytes(args)
	switch {
	case a.IsObject() && providers.ValidJSON(args):
		o.Key("arguments").Compact(a.Raw)
	case done && len(args) > 0:
		q := o.Object("arguments")
		q.Str("query", providers.InPlace(args))
		q.End()
	default:
		o.Object("arguments").End()
	}
}

// writeSummaryText writes a summary_text part of text.
func writeSummaryText(v jsonw.Value, text []byte) {
	o := v.Object()
	o.Str("type", "summary_text")
	o.Str("text", providers.InPlace(text))
	o.End()
}

// writePart writes a message part.
func writePart(v jsonw.Value, p *outPart) {
	o := v.Object()
	if p.refusal {
		o.Str("type", "refusal")
		o.Str("refusal", providers.InPlace(p.text))
		o.End()
		return
	}
	o.Str("type", "output_text")
	o.Str("text", providers.InPlace(p.text))
	a := o.Array("annotations")
	a.List(&p.annotations)
	a.End()
	a = o.Array("logprobs")
	a.List(&p.logprobs)
	a.End()
	o.End()
}

// usage is the hub's token accounting.
type usage struct {
	ok                                                       bool
	prompt, completion, total, cached, cacheWrite, reasoning int64
}

// set reads a hub usage object.
func (u *usage) set(v gjson.Result) {
	if !v.IsObject() {
		return
	}
	u.ok = true
	u.prompt = v.Get("prompt_tokens").Int()
	u.completion = v.Get("completion_tokens").Int()
	u.total = v.Get("total_tokens").Int()
	if u.total == 0 {
		u.total = u.prompt + u.completion
	}
	u.cached = v.Get("prompt_tokens_details.cached_tokens").Int()
	u.cacheWrite = v.Get("prompt_tokens_details.cache_write_tokens").Int()
	u.reasoning = v.Get("completion_tokens_details.reasoning_tokens").Int()
}

// used is the usage write writes, as data: not Known when it writes null.
// The cache's writes are not counted apart, as a Response's readers count
// them (the input's cached tokens are).
func (u *usage) used() providers.Used {
	return providers.Used{Prompt: u.prompt, Cached: u.cached, Completion: u.completion, Reasoning: u.reasoning, Known: u.ok}
}

// write writes the Responses usage object, or null.
func (u *usage) write(v jsonw.Value) {
	if !u.ok {
		v.Null()
		return
	}
	o := v.Object()
	o.Int("input_tokens", u.prompt)
	d := o.Object("input_tokens_details")
	d.Int("cached_tokens", u.cached)
	d.Int("cache_write_tokens", u.cacheWrite)
	d.End()
	o.Int("output_tokens", u.completion)
	d = o.Object("output_tokens_details")
	d.Int("reasoning_tokens", u.reasoning)
	d.End()
	o.Int("total_tokens", u.total)
	o.End()
}

// result is the state of a Response: what is not the request's echo.
type result struct {
	status          string // in_progress, completed, incomplete, failed
	incomplete      string // incomplete_details.reason
	errCode, errMsg string
	model           string // "" means the request's
	serviceTier     string
	items           []*outItem
	usage           usage
	completedAt     int64
}

// statusOf maps a hub finish_reason to a Response status and, for an
// incomplete one, its reason.
func statusOf(finish string) (status, reason string) {
	switch finish {
	case "length":
		return "incomplete", "max_output_tokens"
	case "content_filter":
		return "incomplete", "content_filter"
	}
	return "completed", ""
}

// writeResponse writes the Response object for res.
func (x *Exchange) writeResponse(v jsonw.Value, res *result, encrypted bool) {
	o := v.Object()
	o.Str("id", x.id)
	o.Str("object", "response")
	o.Int("created_at", x.createdAt)
	o.Str("status", res.status)
	o.Bool("background", false)
	if res.status == "completed" {
		o.Int("completed_at", res.completedAt)
	} else {
		o.Null("completed_at")
	}
	if res.errCode != "" {
		e := o.Object("error")
		e.Str("code", res.errCode)
		e.Str("message", res.errMsg)
		e.End()
	} else {
		o.Null("error")
	}
	if res.incomplete != "" {
		d := o.Object("incomplete_details")
		d.Str("reason", res.incomplete)
		d.End()
	} else {
		o.Null("incomplete_details")
	}
	o.Members(x.echoA)
	if res.model != "" {
		o.Str("model", res.model)
	} else {
		o.Raw("model", x.r.model.Raw)
	}
	output := o.Array("output")
	for _, it := range res.items {
		writeItem(output.Value(), it, encrypted)
	}
	output.End()
	o.Members(x.echoB)
	switch {
	case res.serviceTier != "":
		o.Str("service_tier", res.serviceTier)
	case x.r.serviceTier.Type == gjson.String:
		o.Raw("service_tier", x.r.serviceTier.Raw)
	default:
		o.Null("service_tier")
	}
	o.Members(x.echoC)
	res.usage.write(o.Key("usage"))
	o.Members(x.echoD)
	o.End()
}

// appendResponse appends the Response object for res, or reports the
// misuse of the writer that kept it from being written.
func (x *Exchange) appendResponse(b []byte, res *result, encrypted bool) ([]byte, error) {
	w := jsonw.New(b)
	x.writeResponse(w.Value(), res, encrypted)
	return w.Finish()
}

// buildEcho renders the request's fields that every Response repeats,
// with OpenAI's defaults for those the request left out.
func (x *Exchange) buildEcho() {
	r := x.r
	w := jsonw.New(make([]byte, 0, 128+len(r.instructions.Raw)))
	o := w.Object()
	rawOr(o.Key("instructions"), r.instructions, "null")
	rawOr(o.Key("max_output_tokens"), r.maxOutputTokens, "null")
	rawOr(o.Key("max_tool_calls"), r.maxToolCalls, "null")
	o.End()
	x.echoA, x.echoErr = w.Members()

	w = jsonw.New(make([]byte, 0, 256))
	o = w.Object()
	rawOr(o.Key("parallel_tool_calls"), r.parallelToolCalls, "true")
	rawOr(o.Key("previous_response_id"), r.previousResponseID, "null")
	rawOr(o.Key("prompt_cache_key"), r.promptCacheKey, "null")
	rawOr(o.Key("prompt_cache_retention"), r.promptCacheRetention, "null")
	reasoning := o.Object("reasoning")
	rawOr(reasoning.Key("effort"), r.reasoning.Get("effort"), "null")
	summary := r.reasoning.Get("summary")
	if summary.Type != gjson.String {
		summary = r.reasoning.Get("generate_summary")
	}
	rawOr(reasoning.Key("summary"), summary, "null")
	reasoning.End()
	rawOr(o.Key("safety_identifier"), r.safetyIdentifier, "null")
	o.End()
	x.echoB, x.echoErr = membersOr(&w, x.echoErr)

	w = jsonw.New(make([]byte, 0, 256+len(r.tools.Raw)+len(r.text.Raw)))
	o = w.Object()
	rawOr(o.Key("store"), r.store, "true")
	rawOr(o.Key("temperature"), r.temperature, "1")
	text := o.Object("text")
	if f := r.text.Get("format"); f.IsObject() {
		text.Compact("format", f.Raw)
	} else {
		f := text.Object("format")
		f.Str("type", "text")
		f.End()
	}
	rawOr(text.Key("verbosity"), r.text.Get("verbosity"), `"medium"`)
	text.End()
	if tc := r.toolChoice; tc.Type == gjson.String || tc.IsObject() {
		o.Compact("tool_choice", tc.Raw)
	} else {
		o.Str("tool_choice", "auto")
	}
	tools := o.Array("tools")
	for i := range r.toolList {
		t := &r.toolList[i]
		if t.custom {
			tools.Compact(t.v.Raw)
			continue
		}
		f := tools.Object()
		f.Str("type", "function")
		f.Raw("name", t.nameV.Raw)
		rawOr(f.Key("description"), t.description, "null")
		rawOr(f.Key("parameters"), t.parameters, "null")
		rawOr(f.Key("strict"), t.strict, "false")
		f.End()
	}
	tools.End()
	rawOr(o.Key("top_logprobs"), r.topLogprobs, "0")
	rawOr(o.Key("top_p"), r.topP, "1")
	o.Str("truncation", "disabled")
	o.End()
	x.echoC, x.echoErr = membersOr(&w, x.echoErr)

	w = jsonw.New(make([]byte, 0, 96+len(r.metadata.Raw)))
	o = w.Object()
	rawOr(o.Key("user"), r.user, "null")
	rawOr(o.Key("metadata"), r.metadata, "{}")
	// Cyber access programs do not apply to chat providers: null is
	// OpenAI's "implicit Standard" value.
	ap := o.Object("access_programs")
	ap.Null("cyber")
	ap.End()
	o.End()
	x.echoD, x.echoErr = membersOr(&w, x.echoErr)
}

// membersOr returns the members w wrote, and err or else w's misuse.
func membersOr(w *jsonw.Writer, err error) (jsonw.Members, error) {
	m, werr := w.Members()
	if err == nil {
		err = werr
	}
	return m, err
}

// rawOr writes v compacted, or def (JSON) when v is absent or null.
func rawOr(v jsonw.Value, r gjson.Result, def string) {
	if !r.Exists() || r.Type == gjson.Null {
		v.Raw(def)
		return
	}
	v.Compact(r.Raw)
}

var errNotCompletion = errors.New("responses: the answer is not a chat.completion with a message")

// Response translates the hub's answer (a chat.completion) into the
// Response for the client. The record (Record) and the usage the Response
// carries (Used) are ready afterwards.
func (x *Exchange) Response(chat []byte) ([]byte, error) {
	if !providers.ValidJSON(chat) {
		return nil, errNotCompletion
	}
	root := gjson.ParseBytes(chat)
	choice := root.Get("choices.0")
	msg := choice.Get("message")
	if !root.IsObject() || !msg.IsObject() {
		return nil, errNotCompletion
	}
	res := result{completedAt: x.t.now().Unix()}
	res.status, res.incomplete = statusOf(choice.Get("finish_reason").Str)
	if m := root.Get("model"); m.Type == gjson.String {
		res.model = m.Str
	}
	if t := root.Get("service_tier"); t.Type == gjson.String {
		res.serviceTier = t.Str
	}
	res.usage.set(root.Get("usage"))
	res.items = x.outputOf(msg, choice.Get("logprobs.content"))
	if res.status == "incomplete" && len(res.items) > 0 {
		if last := res.items[len(res.items)-1]; last.kind != kindReasoning {
			last.status = "incomplete"
		}
	}
	if x.echoErr != nil {
		return nil, x.echoErr
	}
	var err error
	if x.final, err = x.appendResponse(make([]byte, 0, len(chat)+x.echoC.Len()+512), &res, true); err != nil {
		return nil, err
	}
	x.used = res.usage.used()
	if x.r.includeEncrypted {
		return x.final, nil
	}
	return x.appendResponse(make([]byte, 0, len(x.final)), &res, false)
}

// outputOf builds the output items of a hub message: reasoning, then the
// message, then one item per tool call.
func (x *Exchange) outputOf(msg, logprobs gjson.Result) []*outItem {
	var items []*outItem
	text := msg.Get("reasoning_content")
	if text.Type != gjson.String {
		text = msg.Get("reasoning")
	}
	var thinking jsonw.List
	blocks := msg.Get("thinking_blocks")
	if !blocks.IsArray() {
		blocks = gjson.Result{}
	}
	blocks.ForEach(func(_, block gjson.Result) bool {
		if validThinkingBlock(block) {
			addCompact(&thinking, block.Raw)
		}
		return true
	})
	if text.Str != "" || thinking.Len() > 0 {
		it := &outItem{kind: kindReasoning, id: x.t.newID("rs_"), thinking: thinking}
		if text.Str != "" {
			it.summary = [][]byte{[]byte(text.Str)}
		}
		items = append(items, it)
	}

	var content strings.Builder
	refusal := msg.Get("refusal").Str
	switch c := msg.Get("content"); {
	case c.Type == gjson.String:
		content.WriteString(c.Str)
	case c.IsArray():
		c.ForEach(func(_, part gjson.Result) bool {
			switch part.Get("type").Str {
			case "text", "output_text":
				content.WriteString(part.Get("text").Str)
			case "refusal":
				refusal += part.Get("refusal").Str
			}
			return true
		})
	}
	if content.Len() > 0 || refusal != "" {
		m := &outItem{kind: kindMessage, id: x.t.newID("msg_"), status: "completed"}
		if content.Len() > 0 {
			p := &outPart{text: []byte(content.String())}
			if list := msg.Get("annotations"); list.IsArray() {
				list.ForEach(func(_, a gjson.Result) bool {
					p.addAnnotation(a)
					return true
				})
			}
			if x.r.includeLogprobs && logprobs.IsArray() {
				logprobs.ForEach(func(_, lp gjson.Result) bool {
					addLogprob(&p.logprobs, lp)
					return true
				})
			}
			m.parts = append(m.parts, p)
		}
		if refusal != "" {
			m.parts = append(m.parts, &outPart{refusal: true, text: []byte(refusal)})
		}
		items = append(items, m)
	}

	calls := msg.Get("tool_calls")
	if !calls.IsArray() {
		return items
	}
	calls.ForEach(func(_, tc gjson.Result) bool {
		name := tc.Get("function.name").Str
		id := tc.Get("id").Str
		if id == "" {
			id = x.t.newID("call_")
		}
		args := tc.Get("function.arguments").Str
		it := x.newCall(id, name)
		if it.kind == kindCustom {
			it.args = []byte(customInput(args))
		} else {
			it.args = []byte(args)
		}
		it.status = "completed"
		items = append(items, it)
		return true
	})
	return items
}

// newCall starts the item of a call of the tool name: a custom_tool_call
// for a custom tool of the request, else a function_call.
func (x *Exchange) newCall(callID, name string) *outItem {
	switch t := x.r.hubTool(name); {
	case t == nil:
		return &outItem{kind: kindFunction, id: x.t.newID("fc_"), callID: callID, name: name}
	case t.custom:
		return &outItem{kind: kindCustom, id: x.t.newID("ctc_"), callID: callID, name: t.name, namespace: t.namespace}
	case t.search:
		return &outItem{kind: kindToolSearch, id: x.t.newID("tsc_"), callID: callID, name: t.name}
	default:
		return &outItem{kind: kindFunction, id: x.t.newID("fc_"), callID: callID, name: t.name, namespace: t.namespace}
	}
}

// customInput is the input of a custom tool call from the arguments of
// the function it was sent as: the string parameter, or the arguments
// themselves when the model did not send an object with that string.
func customInput(args string) string {
	if gjson.Valid(args) {
		if in := gjson.Get(args, CustomInputParam); in.Type == gjson.String {
			return in.Str
		}
	}
	return args
}

// addAnnotation adds a hub annotation ({"type":"url_citation",
// "url_citation":{…}}) as a Responses one; other kinds are dropped.
func (p *outPart) addAnnotation(a gjson.Result) bool {
	if a.Get("type").Str != "url_citation" {
		return false
	}
	w := p.annotations.Begin()
	writeAnnotation(w.Value(), a.Get("url_citation"))
	return p.annotations.End(&w) == nil
}

// writeAnnotation writes a url_citation annotation from the hub's
// url_citation object.
func writeAnnotation(v jsonw.Value, c gjson.Result) {
	o := v.Object()
	o.Str("type", "url_citation")
	o.Int("start_index", c.Get("start_index").Int())
	o.Int("end_index", c.Get("end_index").Int())
	o.Str("title", c.Get("title").Str)
	o.Str("url", c.Get("url").Str)
	o.End()
}

// addCompact adds raw, a JSON value, compacted to l.
func addCompact(l *jsonw.List, raw string) {
	w := l.Begin()
	w.Value().Compact(raw)
	_ = l.End(&w) // a single value: no misuse
}

// addLogprob adds to l one token's log probability in the Responses
// shape, from the hub's {token, logprob, bytes, top_logprobs}.
func addLogprob(l *jsonw.List, lp gjson.Result) {
	w := l.Begin()
	o := w.Object()
	writeTokenLogprob(o, lp)
	tops := o.Array("top_logprobs")
	lp.Get("top_logprobs").ForEach(func(_, top gjson.Result) bool {
		t := tops.Object()
		writeTokenLogprob(t, top)
		t.End()
		return true
	})
	tops.End()
	o.End()
	_ = l.End(&w) // straight-line writing: no misuse
}

// writeTokenLogprob writes token, logprob and bytes into o.
func writeTokenLogprob(o jsonw.Object, lp gjson.Result) {
	token := lp.Get("token").Str
	o.Str("token", token)
	if v := lp.Get("logprob"); v.Type == gjson.Number {
		o.Raw("logprob", v.Raw)
	} else {
		o.Int("logprob", 0)
	}
	bytes := o.Array("bytes")
	if bs := lp.Get("bytes"); bs.IsArray() {
		bs.ForEach(func(_, n gjson.Result) bool {
			bytes.Int(n.Int())
			return true
		})
	} else {
		for i := 0; i < len(token); i++ {
			bytes.Int(int64(token[i]))
		}
	}
	bytes.End()
}
