package providertest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// cohereChatFormat is Cohere's Chat API v2, POST /v2/chat (the field names and
// values are cohere-go's V2ChatRequest and V2ChatResponse), served under the
// cohere prefix beside Cohere's rerank row: /cohere/v2/chat. It owns every
// other path under /cohere/, so their 404s are in Cohere's shape.
//
// Answers follow the package doc, in Cohere's terms: a tool call comes with
// a tool plan ("I will call <tool>."); a model whose name contains
// "reasoning" thinks first ("Thinking about: <user text>", cut to
// thinking.token_budget words) unless thinking.type is "disabled"; a stop
// sequence found in the answer ends it there (STOP_SEQUENCE); logprobs
// gives each word -0.5 per token. Usage counts words, in tokens and in
// billed_units alike. A stream is server-sent events, each an "event:
// <type>" line and a data line whose object repeats the type, ending with
// "data: [DONE]"; midstream-error ends it with message-end of
// finish_reason ERROR and an error text, as Cohere reports a failed
// generation.
type cohereChatFormat struct{ modelInBody }

const (
	cohereChatPath = "/cohere/v2/chat"
	coherePrefix   = "/cohere/"
)

func (cohereChatFormat) name() string { return "cohere_chat" }

func (cohereChatFormat) route(r *http.Request) routing {
	if rt := postTo(r, cohereChatPath); rt != notMine {
		return rt
	}
	if strings.HasPrefix(r.URL.Path, coherePrefix) {
		return owned
	}
	return notMine
}

func (cohereChatFormat) headers(h http.Header, id string) { h.Set("X-Debug-Trace-Id", "trace-"+id) }

func (cohereChatFormat) authorized(r *http.Request, want string) bool {
	return keyOK(bearer(r), want)
}

func (cohereChatFormat) fail(w http.ResponseWriter, r *http.Request, f fault) {
	msg := ""
	switch f {
	case notFound:
		msg = "Not Found: " + r.Method + " " + r.URL.Path
	case tooLarge:
		msg = msgTooLarge
	case unreadable:
		msg = msgUnreadable
	case unauthorized:
		msg = "invalid api token"
	case rateLimited:
		msg = "You are past the per minute request limit, please wait and try again later."
	case serverError:
		msg = "internal server error, this has been reported to our developers"
	case overloaded:
		msg = "service unavailable: the model is overloaded, please try again later"
	}
	cohereError(w, f.status(), msg)
}

// cohereError writes Cohere's error body, {"id": …, "message": …}.
func cohereError(w http.ResponseWriter, status int, msg string) {
	b := append([]byte(`{"id":"`), cohereID(w.Header().Get("X-Debug-Trace-Id"))...)
	b = append(b, `","message":`...)
	b = appendString(b, msg)
	writeJSON(w, status, append(b, '}'))
}

// cohereID is a UUID-shaped id made from the request's sequence number
// (or trace id), as Cohere's generation ids are UUIDs.
func cohereID(seq string) string {
	seq = strings.TrimPrefix(seq, "trace-")
	if len(seq) > 12 {
		seq = seq[len(seq)-12:]
	}
	return "00000000-0000-4000-8000-" + strings.Repeat("0", 12-len(seq)) + seq
}

// cohereFields are the top-level fields of V2ChatRequest. Any other (an
// OpenAI field a gateway forgot to translate: top_p, n, stop, user,
// reasoning_effort, stream_options, …) is a 400, as it is at Cohere.
var cohereFields = map[string]bool{
	"model": true, "messages": true, "stream": true, "tools": true, "strict_tools": true,
	"documents": true, "citation_options": true, "response_format": true, "safety_mode": true,
	"max_tokens": true, "stop_sequences": true, "temperature": true, "seed": true,
	"frequency_penalty": true, "presence_penalty": true, "k": true, "p": true, "logprobs": true,
	"tool_choice": true, "thinking": true, "priority": true,
}

// coRequest is a Cohere chat request's top-level fields, read in one pass.
type coRequest struct {
	model, messages, stream, tools, strictTools, documents, responseFormat, safetyMode gjson.Result
	maxTokens, stopSequences, temperature, seed, frequencyPenalty, presencePenalty     gjson.Result
	k, p, logprobs, toolChoice, thinking, priority, citationOptions                    gjson.Result
	msgs                                                                               []gjson.Result
}

// invalid is Cohere's wording of a 400.
func invalid(format string, args ...any) string {
	return "invalid request: " + fmt.Sprintf(format, args...)
}

// checkCohere validates a chat request as strictly as Cohere and returns it
// parsed, or what is wrong with it.
func checkCohere(body []byte) (q coRequest, msg string) {
	if !validJSON(body) || !gjson.ParseBytes(body).IsObject() {
		return q, invalid("the request body must be a JSON object")
	}
	bad := readFields(gjson.ParseBytes(body), []field{
		{"model", &q.model}, {"messages", &q.messages}, {"stream", &q.stream}, {"tools", &q.tools},
		{"strict_tools", &q.strictTools}, {"documents", &q.documents}, {"response_format", &q.responseFormat},
		{"safety_mode", &q.safetyMode}, {"max_tokens", &q.maxTokens}, {"stop_sequences", &q.stopSequences},
		{"temperature", &q.temperature}, {"seed", &q.seed}, {"frequency_penalty", &q.frequencyPenalty},
		{"presence_penalty", &q.presencePenalty}, {"k", &q.k}, {"p", &q.p}, {"logprobs", &q.logprobs},
		{"tool_choice", &q.toolChoice}, {"thinking", &q.thinking}, {"priority", &q.priority},
		{"citation_options", &q.citationOptions},
	}, func(k string) bool { return !cohereFields[k] })
	if bad != "" {
		return q, invalid("unknown field: parameter %s is not a valid field", bad)
	}
	if q.model.Type != gjson.String || q.model.Str == "" {
		return q, invalid("model is required")
	}
	for _, b := range []struct {
		name string
		v    gjson.Result
	}{{"stream", q.stream}, {"strict_tools", q.strictTools}, {"logprobs", q.logprobs}} {
		if b.v.Exists() && b.v.Type != gjson.True && b.v.Type != gjson.False {
			return q, invalid("%s must be a boolean", b.name)
		}
	}
	if msg := checkCohereSampling(&q); msg != "" {
		return q, msg
	}
	if msg := checkCohereMessages(&q); msg != "" {
		return q, msg
	}
	return q, checkCohereTools(&q)
}

// checkCohereSampling checks the generation parameters against the ranges
// cohere-go documents.
func checkCohereSampling(q *coRequest) string {
	num := func(v gjson.Result, name string, lo, hi float64) string {
		if v.Exists() && (v.Type != gjson.Number || v.Num < lo || v.Num > hi) {
			return invalid("%s must be a number from "+strconv.FormatFloat(lo, 'g', -1, 64)+" to "+strconv.FormatFloat(hi, 'g', -1, 64), name)
		}
		return ""
	}
	for _, m := range []string{
		num(q.temperature, "temperature", 0, 1e9),
		num(q.p, "p", 0.01, 0.99),
		num(q.frequencyPenalty, "frequency_penalty", 0, 1),
		num(q.presencePenalty, "presence_penalty", 0, 1),
	} {
		if m != "" {
			return m
		}
	}
	if q.k.Exists() && (!isInt(q.k, 0) || q.k.Int() > 500) {
		return invalid("k must be an integer from 0 to 500")
	}
	if q.maxTokens.Exists() && !isInt(q.maxTokens, 1) {
		return invalid("max_tokens must be a positive integer")
	}
	if q.seed.Exists() && !isInt(q.seed, -1<<62) {
		return invalid("seed must be an integer")
	}
	if q.priority.Exists() && !isInt(q.priority, 0) {
		return invalid("priority must be a non-negative integer")
	}
	if ss := q.stopSequences; ss.Exists() {
		if !ss.IsArray() || len(ss.Array()) > 5 {
			return invalid("stop_sequences must be a list of at most 5 strings")
		}
		for _, s := range ss.Array() {
			if s.Type != gjson.String {
				return invalid("stop_sequences must be a list of at most 5 strings")
			}
		}
	}
	if sm := q.safetyMode; sm.Exists() && sm.Str != "CONTEXTUAL" && sm.Str != "STRICT" && sm.Str != "OFF" {
		return invalid("safety_mode must be one of CONTEXTUAL, STRICT, OFF")
	}
	if th := q.thinking; th.Exists() {
		bad := readFields(th, []field{}, func(k string) bool { return k != "type" && k != "token_budget" })
		if !th.IsObject() || bad != "" {
			return invalid("thinking must be an object with type and token_budget")
		}
		if t := th.Get("type").Str; t != "enabled" && t != "disabled" {
			return invalid("thinking.type must be enabled or disabled")
		}
		if tb := th.Get("token_budget"); tb.Exists() && !isInt(tb, 1) {
			return invalid("thinking.token_budget must be a positive integer")
		}
	}
	if rf := q.responseFormat; rf.Exists() {
		bad := readFields(rf, []field{}, func(k string) bool { return k != "type" && k != "json_schema" })
		switch typ := rf.Get("type").Str; {
		case !rf.IsObject() || bad != "":
			return invalid("response_format must be an object with type and json_schema")
		case typ != "text" && typ != "json_object":
			return invalid("response_format.type must be text or json_object")
		case rf.Get("json_schema").Exists() && (typ != "json_object" || !rf.Get("json_schema").IsObject()):
			return invalid("response_format.json_schema must be an object, with type json_object")
		case typ == "json_object" && (isSet(q.tools) || isSet(q.documents)):
			return invalid("response_format is not supported with tools or documents")
		}
	}
	return ""
}

// checkCohereMessages checks the messages: their roles, their content
// items, and that every tool call of an assistant message is answered by
// tool messages right after it, each naming one of those calls.
func checkCohereMessages(q *coRequest) string {
	if !q.messages.IsArray() {
		return invalid("messages is required")
	}
	q.msgs = q.messages.Array()
	if len(q.msgs) == 0 {
		return invalid("messages must contain at least one message")
	}
	var pending []string // tool calls of the last assistant message, not yet answered
	for i, m := range q.msgs {
		p := "messages[" + strconv.Itoa(i) + "]"
		if !m.IsObject() {
			return invalid("%s must be an object", p)
		}
		role := m.Get("role").Str
		allowed := map[string][]string{
			"system":    {"role", "content"},
			"user":      {"role", "content"},
			"assistant": {"role", "content", "tool_calls", "tool_plan", "citations"},
			"tool":      {"role", "content", "tool_call_id"},
		}[role]
		if allowed == nil {
			return invalid("%s.role must be one of system, user, assistant, tool", p)
		}
		if bad := readFields(m, []field{}, func(k string) bool { return indexOf(allowed, k) < 0 }); bad != "" {
			return invalid("unknown field: %s.%s is not a valid field for a %s message", p, bad, role)
		}
		if role != "tool" && len(pending) > 0 {
			return invalid("%s: the tool calls %s have no tool results", p, strings.Join(pending, ", "))
		}
		content := m.Get("content")
		switch role {
		case "system", "user":
			if msg := checkCohereContent(p+".content", content, role); msg != "" {
				return msg
			}
		case "assistant":
			calls := m.Get("tool_calls")
			if isSet(calls) && !calls.IsArray() {
				return invalid("%s.tool_calls must be a list", p)
			}
			if !isSet(content) && len(calls.Array()) == 0 {
				return invalid("%s: an assistant message needs content or tool_calls", p)
			}
			if isSet(content) {
				if msg := checkCohereContent(p+".content", content, role); msg != "" {
					return msg
				}
			}
			if tp := m.Get("tool_plan"); tp.Exists() && tp.Type != gjson.String {
				return invalid("%s.tool_plan must be a string", p)
			}
			for j, c := range calls.Array() {
				cp := p + ".tool_calls[" + strconv.Itoa(j) + "]"
				fn := c.Get("function")
				args := fn.Get("arguments")
				switch {
				case c.Get("id").Str == "":
					return invalid("%s.id is required", cp)
				case c.Get("type").Str != "function":
					return invalid("%s.type must be function", cp)
				case fn.Get("name").Str == "":
					return invalid("%s.function.name is required", cp)
				case args.Type != gjson.String || !gjson.Valid(args.Str):
					return invalid("%s.function.arguments must be a JSON string", cp)
				}
				pending = append(pending, c.Get("id").Str)
			}
		case "tool":
			id := m.Get("tool_call_id")
			k := indexOf(pending, id.Str)
			if id.Str == "" || k < 0 {
				return invalid("%s.tool_call_id %s does not match a tool call of the assistant message before it", p, strconv.Quote(id.Str))
			}
			pending = append(pending[:k], pending[k+1:]...)
			if msg := checkCohereContent(p+".content", content, role); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// checkCohereContent checks a message's content: a string, or a list of
// the content items the role takes (text everywhere; image_url from users;
// thinking from the assistant; document in tool results).
func checkCohereContent(p string, c gjson.Result, role string) string {
	if c.Type == gjson.String {
		return ""
	}
	if !c.IsArray() {
		return invalid("%s must be a string or a list of content items", p)
	}
	for j, item := range c.Array() {
		ip := p + "[" + strconv.Itoa(j) + "]"
		typ := item.Get("type").Str
		fields := map[string][]string{"text": {"type", "text"}, "image_url": {"type", "image_url"},
			"thinking": {"type", "thinking"}, "document": {"type", "document"}}[typ]
		if fields == nil {
			return invalid("%s.type %s is not a content type", ip, strconv.Quote(typ))
		}
		if bad := readFields(item, []field{}, func(k string) bool { return indexOf(fields, k) < 0 }); bad != "" {
			return invalid("unknown field: %s.%s is not a valid field", ip, bad)
		}
		switch {
		case typ == "text":
			if item.Get("text").Type != gjson.String {
				return invalid("%s.text is required", ip)
			}
		case typ == "image_url" && role == "user":
			img := item.Get("image_url")
			u := img.Get("url").Str
			if bad := readFields(img, []field{}, func(k string) bool { return k != "url" && k != "detail" }); bad != "" {
				return invalid("unknown field: %s.image_url.%s is not a valid field", ip, bad)
			}
			if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") &&
				!(strings.HasPrefix(u, "data:image/") && strings.Contains(u, ";base64,")) {
				return invalid("%s.image_url.url must be a web URL or a base64 data URI of an image", ip)
			}
			if d := img.Get("detail"); d.Exists() && d.Str != "auto" && d.Str != "low" && d.Str != "high" {
				return invalid("%s.image_url.detail must be auto, low or high", ip)
			}
		case typ == "thinking" && role == "assistant":
			if item.Get("thinking").Type != gjson.String {
				return invalid("%s.thinking is required", ip)
			}
		case typ == "document" && role == "tool":
			if !item.Get("document.data").IsObject() {
				return invalid("%s.document.data must be an object", ip)
			}
		default:
			return invalid("%s.type %s is not allowed in a %s message", ip, typ, role)
		}
	}
	return ""
}

// checkCohereTools checks tools and tool_choice.
func checkCohereTools(q *coRequest) string {
	tools := q.tools
	if isSet(tools) && !tools.IsArray() {
		return invalid("tools must be a list")
	}
	for i, t := range tools.Array() {
		p := "tools[" + strconv.Itoa(i) + "]"
		if bad := readFields(t, []field{}, func(k string) bool { return k != "type" && k != "function" }); bad != "" {
			return invalid("unknown field: %s.%s is not a valid field", p, bad)
		}
		fn := t.Get("function")
		if bad := readFields(fn, []field{}, func(k string) bool { return k != "name" && k != "description" && k != "parameters" }); bad != "" {
			return invalid("unknown field: %s.function.%s is not a valid field", p, bad)
		}
		switch {
		case t.Get("type").Str != "function":
			return invalid("%s.type must be function", p)
		case fn.Get("name").Str == "":
			return invalid("%s.function.name is required", p)
		case !fn.Get("parameters").IsObject():
			return invalid("%s.function.parameters must be a JSON schema object", p)
		}
	}
	if tc := q.toolChoice; tc.Exists() {
		if tc.Str != "REQUIRED" && tc.Str != "NONE" {
			return invalid("tool_choice must be REQUIRED or NONE")
		}
		if len(tools.Array()) == 0 {
			return invalid("tool_choice requires tools")
		}
	}
	return ""
}

func (cohereChatFormat) serve(c *call) {
	q, msg := checkCohere(c.body)
	if msg != "" {
		cohereError(c.w, http.StatusBadRequest, msg)
		return
	}
	if c.scripted() {
		return
	}

	promptWords, userText, userLast, results := chatConversation(q.msgs, cohereText, c.s.promptTokens)
	var tools []string
	for _, t := range q.tools.Array() {
		tools = append(tools, t.Get("function.name").Str)
	}
	a := decide(userText, strings.Join(results, " "), len(results) > 0, userLast,
		tools, "", q.toolChoice.Str == "NONE", q.maxTokens.Int(), promptWords)
	if rf := q.responseFormat; rf.Get("type").Str == "json_object" && a.tool == "" {
		a.structured(rf.Get("json_schema"), a.text())
	}
	co := cohereAnswer{answer: a, finish: "COMPLETE"}
	switch {
	case a.tool != "":
		co.finish = "TOOL_CALL"
	case a.truncated:
		co.finish = "MAX_TOKENS"
	default:
		co.stopAt(q.stopSequences)
	}
	if strings.Contains(c.model, "reasoning") && q.thinking.Get("type").Str != "disabled" {
		co.thinking = strings.Fields("Thinking about: " + userText)
		if tb := q.thinking.Get("token_budget").Int(); tb > 0 && int64(len(co.thinking)) > tb {
			co.thinking = co.thinking[:tb]
		}
	} else if a.tool != "" {
		co.plan = strings.Fields("I will call " + a.tool + ".")
	}
	co.logprobs = q.logprobs.Type == gjson.True

	if q.stream.Type == gjson.True {
		streamCohere(c, &co)
		return
	}
	b := make([]byte, 0, 768)
	b = append(b, `{"id":"`...)
	b = append(b, cohereID(c.id)...)
	b = append(b, `","finish_reason":"`...)
	b = append(b, co.finish...)
	b = append(b, `","message":{"role":"assistant"`...)
	if a.tool != "" {
		if len(co.plan) > 0 {
			b = append(b, `,"tool_plan":`...)
			b = appendString(b, strings.Join(co.plan, " "))
		}
		if len(co.thinking) > 0 {
			b = append(b, `,"content":[`...)
			b = co.appendThinking(b)
			b = append(b, ']')
		}
		b = append(b, `,"tool_calls":[{"id":`...)
		b = appendString(b, co.callID(c.id))
		b = append(b, `,"type":"function","function":{"name":`...)
		b = appendString(b, a.tool)
		b = append(b, `,"arguments":`...)
		b = appendString(b, string(a.toolArgs))
		b = append(b, `}}]`...)
	} else {
		b = append(b, `,"content":[`...)
		if len(co.thinking) > 0 {
			b = co.appendThinking(b)
			b = append(b, ',')
		}
		b = append(b, `{"type":"text","text":`...)
		b = appendString(b, a.text())
		b = append(b, `}]`...)
	}
	b = append(b, `},"usage":`...)
	b = co.appendUsage(b)
	if co.logprobs && a.tool == "" {
		b = append(b, `,"logprobs":[`...)
		for i := range a.words {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCohereLogprob(b, a.chunkWord(i), i)
		}
		b = append(b, ']')
	}
	writeJSON(c.w, http.StatusOK, append(b, '}'))
}

// cohereText is the text of a Cohere message's content: the string, or its
// text items joined with spaces, and a document's data as JSON.
func cohereText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	var parts []string
	for _, item := range c.Array() {
		switch item.Get("type").Str {
		case "text":
			parts = append(parts, item.Get("text").Str)
		case "document":
			parts = append(parts, item.Get("document.data").Raw)
		}
	}
	return strings.Join(parts, " ")
}

// cohereAnswer is the fake's answer in Cohere's terms.
type cohereAnswer struct {
	*answer
	finish   string
	thinking []string // thinking words, for a reasoning model
	plan     []string // tool plan words, with a tool call
	logprobs bool
}

// stopAt ends the text answer before the first stop sequence in it.
func (co *cohereAnswer) stopAt(stops gjson.Result) {
	text := co.text()
	cut := -1
	for _, s := range stops.Array() {
		if i := strings.Index(text, s.Str); s.Str != "" && i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		co.words = strings.Fields(text[:cut])
		co.finish = "STOP_SEQUENCE"
	}
}

// outputTokens counts the answer's words, its thinking and its plan.
func (co *cohereAnswer) outputTokens() int {
	return co.completionTokens() + len(co.thinking) + len(co.plan)
}

func (co *cohereAnswer) callID(id string) string { return co.tool + "_" + id + "fake" }

func (co *cohereAnswer) appendThinking(b []byte) []byte {
	b = append(b, `{"type":"thinking","thinking":`...)
	b = appendString(b, strings.Join(co.thinking, " "))
	return append(b, '}')
}

// appendUsage appends Cohere's usage: word counts as tokens and billed
// units.
func (co *cohereAnswer) appendUsage(b []byte) []byte {
	in, out := strconv.Itoa(co.promptTokens), strconv.Itoa(co.outputTokens())
	counts := `{"input_tokens":` + in + `,"output_tokens":` + out + `}`
	return append(b, `{"billed_units":`+counts+`,"tokens":`+counts+`}`...)
}

// appendCohereLogprob appends a logprob item for the i-th word chunk: one
// token per byte of the chunk, up to 3, each at -0.5.
func appendCohereLogprob(b []byte, chunk string, i int) []byte {
	b = append(b, `{"text":`...)
	b = appendString(b, chunk)
	n := min(len(chunk), 3)
	b = append(b, `,"token_ids":[`...)
	for k := range n {
		if k > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(1000+10*i+k), 10)
	}
	b = append(b, `],"logprobs":[`...)
	for k := range n {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, "-0.5"...)
	}
	return append(b, "]}"...)
}

// streamCohere sends the answer as Cohere's chat stream events, flushing
// after each.
func streamCohere(c *call, co *cohereAnswer) {
	c.startSSE()
	event := func(typ string, data []byte) {
		b := make([]byte, 0, len(data)+48)
		b = append(b, "event: "...)
		b = append(b, typ...)
		b = append(b, "\ndata: "...)
		b = append(b, data...)
		b = append(b, "\n\n"...)
		c.send(b)
	}
	// obj is {"type":typ,…rest}.
	obj := func(typ, rest string) []byte {
		return []byte(`{"type":"` + typ + `"` + rest + `}`)
	}
	// ended runs the scripted behaviour due after the first content event
	// and reports whether the stream ends there.
	first := true
	ended := func() bool {
		if !first {
			return false
		}
		first = false
		return c.afterFirstWord(cohereStreamError)
	}
	event("message-start", obj("message-start", `,"id":"`+cohereID(c.id)+`","delta":{"message":{"role":"assistant","content":[],"tool_plan":"","tool_calls":[],"citations":[]}}`))

	index := 0
	if len(co.thinking) > 0 {
		event("content-start", obj("content-start", `,"index":0,"delta":{"message":{"content":{"type":"thinking","thinking":""}}}`))
		for i, w := range co.thinking {
			if i > 0 {
				w = " " + w
			}
			event("content-delta", obj("content-delta", `,"index":0,"delta":{"message":{"content":{"thinking":`+string(appendString(nil, w))+`}}}`))
			if ended() {
				return
			}
		}
		event("content-end", obj("content-end", `,"index":0`))
		index++
	}
	if co.tool != "" {
		for i, w := range co.plan {
			if i > 0 {
				w = " " + w
			}
			event("tool-plan-delta", obj("tool-plan-delta", `,"delta":{"message":{"tool_plan":`+string(appendString(nil, w))+`}}`))
			if ended() {
				return
			}
		}
		start := `,"index":0,"delta":{"message":{"tool_calls":{"id":` + string(appendString(nil, co.callID(c.id))) +
			`,"type":"function","function":{"name":` + string(appendString(nil, co.tool)) + `,"arguments":""}}}}`
		event("tool-call-start", obj("tool-call-start", start))
		for _, f := range co.argFragments() {
			event("tool-call-delta", obj("tool-call-delta", `,"index":0,"delta":{"message":{"tool_calls":{"function":{"arguments":`+string(appendString(nil, f))+`}}}}`))
			if ended() {
				return
			}
		}
		event("tool-call-end", obj("tool-call-end", `,"index":0`))
	} else {
		ix := strconv.Itoa(index)
		event("content-start", obj("content-start", `,"index":`+ix+`,"delta":{"message":{"content":{"type":"text","text":""}}}`))
		for i := range co.words {
			w := co.chunkWord(i)
			rest := `,"index":` + ix + `,"delta":{"message":{"content":{"text":` + string(appendString(nil, w)) + `}}}`
			if co.logprobs {
				rest += `,"logprobs":` + string(appendCohereLogprob(nil, w, i))
			}
			event("content-delta", obj("content-delta", rest))
			if ended() {
				return
			}
		}
		event("content-end", obj("content-end", `,"index":`+ix))
	}
	end := []byte(`,"delta":{"finish_reason":"` + co.finish + `","usage":`)
	end = co.appendUsage(end)
	event("message-end", obj("message-end", string(end)+"}"))
	c.send([]byte("data: [DONE]\n\n"))
}

// cohereStreamError is how a midstream-error stream ends: message-end with
// finish_reason ERROR and the error's text, as cohere-go's
// ChatMessageEndEventDelta has it.
var cohereStreamError = []byte("event: message-end\ndata: " +
	`{"type":"message-end","delta":{"finish_reason":"ERROR","error":"internal server error, this has been reported to our developers"}}` + "\n\n")
