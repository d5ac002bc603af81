package responses

import (
	"errors"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// Kinds of output item.
type itemKind uint8

const (
	kindReasoning itemKind = iota
	kindMessage
	kindFunction
	kindCustom
)

// outItem is one output item of a Response, as a stream builds it up or
// an answer gives it whole.
type outItem struct {
	kind   itemKind
	id     string
	status string // messages and calls: in_progress, completed, incomplete

	// reasoning
	summary  [][]byte // the summary parts' text
	thinking []byte   // thinking blocks, comma-separated JSON objects

	// message
	parts []*outPart

	// function and custom tool calls
	callID, name string
	args         []byte // arguments (function) or input (custom)
}

// outPart is a message's output_text or refusal part.
type outPart struct {
	refusal     bool
	text        []byte
	annotations []byte // comma-separated annotation objects
	nAnnot      int
	logprobs    []byte // comma-separated logprob objects
}

// appendItem appends the item in its current state; encrypted says whether
// a reasoning item carries its encrypted_content.
func appendItem(b []byte, it *outItem, encrypted bool) []byte {
	b = append(b, `{"id":`...)
	b = providers.AppendString(b, it.id)
	switch it.kind {
	case kindReasoning:
		b = append(b, `,"type":"reasoning","summary":[`...)
		for i, s := range it.summary {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"summary_text","text":`...)
			b = providers.AppendString(b, string(s))
			b = append(b, '}')
		}
		b = append(b, ']')
		if encrypted && len(it.thinking) > 0 {
			b = append(b, `,"encrypted_content":`...)
			b = appendEncrypted(b, it.thinking)
		}
	case kindMessage:
		b = append(b, `,"type":"message","status":"`...)
		b = append(b, it.status...)
		b = append(b, `","role":"assistant","content":[`...)
		for i, p := range it.parts {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPart(b, p)
		}
		b = append(b, ']')
	case kindFunction:
		b = append(b, `,"type":"function_call","status":"`...)
		b = append(b, it.status...)
		b = append(b, `","arguments":`...)
		b = providers.AppendString(b, string(it.args))
		b = append(b, `,"call_id":`...)
		b = providers.AppendString(b, it.callID)
		b = append(b, `,"name":`...)
		b = providers.AppendString(b, it.name)
	case kindCustom:
		b = append(b, `,"type":"custom_tool_call","status":"`...)
		b = append(b, it.status...)
		b = append(b, `","call_id":`...)
		b = providers.AppendString(b, it.callID)
		b = append(b, `,"name":`...)
		b = providers.AppendString(b, it.name)
		b = append(b, `,"input":`...)
		b = providers.AppendString(b, string(it.args))
	}
	return append(b, '}')
}

// appendPart appends a message part.
func appendPart(b []byte, p *outPart) []byte {
	if p.refusal {
		b = append(b, `{"type":"refusal","refusal":`...)
		b = providers.AppendString(b, string(p.text))
		return append(b, '}')
	}
	b = append(b, `{"type":"output_text","text":`...)
	b = providers.AppendString(b, string(p.text))
	b = append(b, `,"annotations":[`...)
	b = append(b, p.annotations...)
	b = append(b, `],"logprobs":[`...)
	b = append(b, p.logprobs...)
	return append(b, "]}"...)
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

// append appends the Responses usage object, or null.
func (u *usage) append(b []byte) []byte {
	if !u.ok {
		return append(b, "null"...)
	}
	b = append(b, `{"input_tokens":`...)
	b = providers.AppendInt(b, u.prompt)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = providers.AppendInt(b, u.cached)
	b = append(b, `,"cache_write_tokens":`...)
	b = providers.AppendInt(b, u.cacheWrite)
	b = append(b, `},"output_tokens":`...)
	b = providers.AppendInt(b, u.completion)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = providers.AppendInt(b, u.reasoning)
	b = append(b, `},"total_tokens":`...)
	b = providers.AppendInt(b, u.total)
	return append(b, '}')
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

// appendResponse appends the Response object for res.
func (x *Exchange) appendResponse(b []byte, res *result, encrypted bool) []byte {
	b = append(b, `{"id":`...)
	b = providers.AppendString(b, x.id)
	b = append(b, `,"object":"response","created_at":`...)
	b = providers.AppendInt(b, x.createdAt)
	b = append(b, `,"status":"`...)
	b = append(b, res.status...)
	b = append(b, `","background":false,"completed_at":`...)
	if res.status == "completed" {
		b = providers.AppendInt(b, res.completedAt)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"error":`...)
	if res.errCode != "" {
		b = append(b, `{"code":`...)
		b = providers.AppendString(b, res.errCode)
		b = append(b, `,"message":`...)
		b = providers.AppendString(b, res.errMsg)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"incomplete_details":`...)
	if res.incomplete != "" {
		b = append(b, `{"reason":"`...)
		b = append(b, res.incomplete...)
		b = append(b, `"}`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, x.echoA...)
	b = append(b, `,"model":`...)
	if res.model != "" {
		b = providers.AppendString(b, res.model)
	} else {
		b = append(b, x.r.model.Raw...)
	}
	b = append(b, `,"output":[`...)
	for i, it := range res.items {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendItem(b, it, encrypted)
	}
	b = append(b, ']')
	b = append(b, x.echoB...)
	b = append(b, `,"service_tier":`...)
	switch {
	case res.serviceTier != "":
		b = providers.AppendString(b, res.serviceTier)
	case x.r.serviceTier.Type == gjson.String:
		b = append(b, x.r.serviceTier.Raw...)
	default:
		b = append(b, "null"...)
	}
	b = append(b, x.echoC...)
	b = append(b, `,"usage":`...)
	b = res.usage.append(b)
	return append(b, x.echoD...)
}

// buildEcho renders the request's fields that every Response repeats,
// with OpenAI's defaults for those the request left out.
func (x *Exchange) buildEcho() {
	r := x.r
	a := make([]byte, 0, 128+len(r.instructions.Raw))
	a = append(a, `,"instructions":`...)
	a = appendRawOr(a, r.instructions, "null")
	a = append(a, `,"max_output_tokens":`...)
	a = appendRawOr(a, r.maxOutputTokens, "null")
	a = append(a, `,"max_tool_calls":`...)
	a = appendRawOr(a, r.maxToolCalls, "null")
	x.echoA = a

	b := make([]byte, 0, 256)
	b = append(b, `,"parallel_tool_calls":`...)
	b = appendRawOr(b, r.parallelToolCalls, "true")
	b = append(b, `,"previous_response_id":`...)
	b = appendRawOr(b, r.previousResponseID, "null")
	b = append(b, `,"prompt_cache_key":`...)
	b = appendRawOr(b, r.promptCacheKey, "null")
	b = append(b, `,"prompt_cache_retention":`...)
	b = appendRawOr(b, r.promptCacheRetention, "null")
	b = append(b, `,"reasoning":{"effort":`...)
	b = appendRawOr(b, r.reasoning.Get("effort"), "null")
	b = append(b, `,"summary":`...)
	summary := r.reasoning.Get("summary")
	if summary.Type != gjson.String {
		summary = r.reasoning.Get("generate_summary")
	}
	b = appendRawOr(b, summary, "null")
	b = append(b, `},"safety_identifier":`...)
	b = appendRawOr(b, r.safetyIdentifier, "null")
	x.echoB = b

	c := make([]byte, 0, 256+len(r.tools.Raw)+len(r.text.Raw))
	c = append(c, `,"store":`...)
	c = appendRawOr(c, r.store, "true")
	c = append(c, `,"temperature":`...)
	c = appendRawOr(c, r.temperature, "1")
	c = append(c, `,"text":{"format":`...)
	if f := r.text.Get("format"); f.IsObject() {
		c = providers.AppendCompactJSON(c, f.Raw)
	} else {
		c = append(c, `{"type":"text"}`...)
	}
	c = append(c, `,"verbosity":`...)
	c = appendRawOr(c, r.text.Get("verbosity"), `"medium"`)
	c = append(c, `},"tool_choice":`...)
	if tc := r.toolChoice; tc.Type == gjson.String || tc.IsObject() {
		c = providers.AppendCompactJSON(c, tc.Raw)
	} else {
		c = append(c, `"auto"`...)
	}
	c = append(c, `,"tools":[`...)
	for i := range r.toolList {
		if i > 0 {
			c = append(c, ',')
		}
		t := &r.toolList[i]
		if t.custom {
			c = providers.AppendCompactJSON(c, t.v.Raw)
			continue
		}
		c = append(c, `{"type":"function","name":`...)
		c = append(c, t.nameV.Raw...)
		c = append(c, `,"description":`...)
		c = appendRawOr(c, t.description, "null")
		c = append(c, `,"parameters":`...)
		c = appendRawOr(c, t.parameters, "null")
		c = append(c, `,"strict":`...)
		c = appendRawOr(c, t.strict, "false")
		c = append(c, '}')
	}
	c = append(c, `],"top_logprobs":`...)
	c = appendRawOr(c, r.topLogprobs, "0")
	c = append(c, `,"top_p":`...)
	c = appendRawOr(c, r.topP, "1")
	c = append(c, `,"truncation":"disabled"`...)
	x.echoC = c

	d := make([]byte, 0, 96+len(r.metadata.Raw))
	d = append(d, `,"user":`...)
	d = appendRawOr(d, r.user, "null")
	d = append(d, `,"metadata":`...)
	d = appendRawOr(d, r.metadata, "{}")
	// Cyber access programs do not apply to chat providers: null is
	// OpenAI's "implicit Standard" value.
	d = append(d, `,"access_programs":{"cyber":null}}`...)
	x.echoD = d
}

// appendRawOr appends v compacted, or def when v is absent or null.
func appendRawOr(b []byte, v gjson.Result, def string) []byte {
	if !v.Exists() || v.Type == gjson.Null {
		return append(b, def...)
	}
	return providers.AppendCompactJSON(b, v.Raw)
}

var errNotCompletion = errors.New("responses: the answer is not a chat.completion with a message")

// Response translates the hub's answer (a chat.completion) into the
// Response for the client. The record (Record) is ready afterwards.
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
	x.final = x.appendResponse(make([]byte, 0, len(chat)+len(x.echoC)+512), &res, true)
	if x.r.includeEncrypted {
		return x.final, nil
	}
	return x.appendResponse(make([]byte, 0, len(x.final)), &res, false), nil
}

// outputOf builds the output items of a hub message: reasoning, then the
// message, then one item per tool call.
func (x *Exchange) outputOf(msg, logprobs gjson.Result) []*outItem {
	var items []*outItem
	text := msg.Get("reasoning_content")
	if text.Type != gjson.String {
		text = msg.Get("reasoning")
	}
	var thinking []byte
	blocks := msg.Get("thinking_blocks")
	if !blocks.IsArray() {
		blocks = gjson.Result{}
	}
	blocks.ForEach(func(_, block gjson.Result) bool {
		if validThinkingBlock(block) {
			if len(thinking) > 0 {
				thinking = append(thinking, ',')
			}
			thinking = providers.AppendCompactJSON(thinking, block.Raw)
		}
		return true
	})
	if text.Str != "" || len(thinking) > 0 {
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
					p.logprobs = appendLogprob(p.logprobs, lp)
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
	if x.r.isCustom(name) {
		return &outItem{kind: kindCustom, id: x.t.newID("ctc_"), callID: callID, name: name}
	}
	return &outItem{kind: kindFunction, id: x.t.newID("fc_"), callID: callID, name: name}
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
	c := a.Get("url_citation")
	if p.nAnnot > 0 {
		p.annotations = append(p.annotations, ',')
	}
	p.nAnnot++
	p.annotations = appendAnnotation(p.annotations, c)
	return true
}

// appendAnnotation appends a url_citation annotation from the hub's
// url_citation object.
func appendAnnotation(b []byte, c gjson.Result) []byte {
	b = append(b, `{"type":"url_citation","start_index":`...)
	b = providers.AppendInt(b, c.Get("start_index").Int())
	b = append(b, `,"end_index":`...)
	b = providers.AppendInt(b, c.Get("end_index").Int())
	b = append(b, `,"title":`...)
	b = providers.AppendString(b, c.Get("title").Str)
	b = append(b, `,"url":`...)
	b = providers.AppendString(b, c.Get("url").Str)
	return append(b, '}')
}

// appendLogprob appends, after a comma when b is not empty, one token's
// log probability in the Responses shape, from the hub's
// {token, logprob, bytes, top_logprobs}.
func appendLogprob(b []byte, lp gjson.Result) []byte {
	if len(b) > 0 {
		b = append(b, ',')
	}
	b = appendTokenLogprob(b, lp)
	b = b[:len(b)-1]
	b = append(b, `,"top_logprobs":[`...)
	i := 0
	lp.Get("top_logprobs").ForEach(func(_, top gjson.Result) bool {
		if i > 0 {
			b = append(b, ',')
		}
		i++
		b = appendTokenLogprob(b, top)
		return true
	})
	return append(b, "]}"...)
}

// appendTokenLogprob appends {"token","logprob","bytes"}.
func appendTokenLogprob(b []byte, lp gjson.Result) []byte {
	token := lp.Get("token").Str
	b = append(b, `{"token":`...)
	b = providers.AppendString(b, token)
	b = append(b, `,"logprob":`...)
	if v := lp.Get("logprob"); v.Type == gjson.Number {
		b = append(b, v.Raw...)
	} else {
		b = append(b, '0')
	}
	b = append(b, `,"bytes":[`...)
	if bs := lp.Get("bytes"); bs.IsArray() {
		i := 0
		bs.ForEach(func(_, n gjson.Result) bool {
			if i > 0 {
				b = append(b, ',')
			}
			i++
			b = providers.AppendInt(b, n.Int())
			return true
		})
	} else {
		for i := 0; i < len(token); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = providers.AppendInt(b, int64(token[i]))
		}
	}
	return append(b, "]}"...)
}
