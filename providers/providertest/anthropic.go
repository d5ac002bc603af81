package providertest

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// anthropicFields are the top-level fields the Messages API accepts; any
// other (an OpenAI field a gateway forgot to translate) is a 400, as it is
// at Anthropic.
var anthropicFields = map[string]bool{
	"model": true, "max_tokens": true, "messages": true, "system": true, "stop_sequences": true,
	"temperature": true, "top_p": true, "top_k": true, "stream": true, "metadata": true,
	"tools": true, "tool_choice": true, "thinking": true, "service_tier": true,
	"container": true, "output_config": true, "cache_control": true, "inference_geo": true,
	"mcp_servers": true, "context_management": true,
}

// validAnthropicVersion reports whether v is a well-formed anthropic-version:
// a calendar date, YYYY-MM-DD. Anthropic takes any such date, the versions
// its SDKs and Claude Code send as they are released included; it refuses
// a missing header and one that is not a date.
func validAnthropicVersion(v string) bool {
	if len(v) != len("2006-01-02") {
		return false
	}
	_, err := time.Parse(time.DateOnly, v)
	return err == nil
}

// anthropicFormat is Anthropic's Messages API. It owns
// every path under /v1/messages: their 404s are in its shape.
type anthropicFormat struct{ modelInBody }

func (anthropicFormat) name() string { return "anthropic" }

func (anthropicFormat) route(r *http.Request) routing {
	if rt := postTo(r, "/v1/messages"); rt != notMine {
		return rt
	}
	if rt := postTo(r, anCountTokens); rt != notMine {
		return rt
	}
	if strings.HasPrefix(r.URL.Path, "/v1/messages/") {
		return owned
	}
	return notMine
}

func (anthropicFormat) headers(h http.Header, id string) { h.Set("Request-Id", "req_"+id) }

func (anthropicFormat) authorized(r *http.Request, want string) bool {
	return keyOK(r.Header.Get("X-Api-Key"), want)
}

func (anthropicFormat) fail(w http.ResponseWriter, r *http.Request, f fault) {
	status, typ, msg := f.status(), "", ""
	switch f {
	case notFound:
		typ, msg = "not_found_error", "Not Found: "+r.Method+" "+r.URL.Path
	case tooLarge:
		typ, msg = "request_too_large", msgTooLarge
	case unreadable:
		typ, msg = "invalid_request_error", msgUnreadable
	case unauthorized:
		typ, msg = "authentication_error", "invalid x-api-key"
	case rateLimited:
		typ, msg = "rate_limit_error", "rate limit reached"
	case serverError:
		typ, msg = "api_error", "internal server error"
	case overloaded:
		status, typ, msg = 529, "overloaded_error", "Overloaded"
	}
	anthropicError(w, status, typ, msg)
}

func (anthropicFormat) serve(c *call) {
	w, r := c.w, c.r
	if r.Header.Get("Authorization") != "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error",
			"send the API key as x-api-key only; an Authorization header (here besides x-api-key) is taken for an OAuth token, so a gateway must not forward its own")
		return
	}
	if v := r.Header.Get("Anthropic-Version"); !validAnthropicVersion(v) {
		msg := "anthropic-version: header is required"
		if v != "" {
			msg = "anthropic-version: " + strconv.Quote(v) + " is not a valid version (a date such as 2023-06-01)"
		}
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	if r.URL.Path == anCountTokens {
		countTokens(c)
		return
	}
	serveMessages(c)
}

// serveMessages answers c.body, a Messages request, as Anthropic's API
// does: its checks, then the answer, streamed or not, into c.w. The
// Messages API of the clouds (Bedrock's InvokeModel, Vertex AI's
// rawPredict) answers through it too, once their envelope is taken off.
func serveMessages(c *call) {
	w := c.w
	q, msg := checkAnthropic(c.body)
	if msg != "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	if c.scripted() {
		return
	}
	model, id := q.model.Str, c.id

	promptWords := c.s.promptTokens(contentText(q.system))
	msgs := q.msgs
	userText := ""
	for _, m := range msgs {
		text := contentText(m.Get("content"))
		promptWords += c.s.promptTokens(text)
		for _, b := range m.Get("content").Array() {
			if b.Get("type").Str == "tool_result" {
				promptWords += c.s.promptTokens(contentText(b.Get("content")))
			}
		}
		if m.Get("role").Str == "user" && text != "" {
			userText = lastText(m.Get("content"))
		}
	}
	// The answer follows the last message: a user turn of only tool
	// results is answered with them; an assistant turn is a prefill.
	last := msgs[len(msgs)-1]
	userLast := last.Get("role").Str == "user"
	var results []string
	if userLast && contentText(last.Get("content")) == "" {
		for _, b := range last.Get("content").Array() {
			if b.Get("type").Str == "tool_result" {
				results = append(results, contentText(b.Get("content")))
			}
		}
	}
	var tools []string // the client's tools, which the fake may call
	for _, t := range q.tools.Array() {
		if typ := t.Get("type").Str; typ == "" || typ == "custom" {
			tools = append(tools, t.Get("name").Str)
		}
	}
	tc := q.toolChoice
	a := decide(userText, strings.Join(results, " "), len(results) > 0, userLast, tools, tc.Get("name").Str,
		tc.Get("type").Str == "none" || textOnly(q.model.Str), q.maxTokens.Int(), promptWords)

	// Structured output: a tool's input is an instance of its schema
	// (when the schema names properties; {"query": …} otherwise), so a
	// forced tool carries a schema's instance; JSON outputs
	// (output_config.format) make the text an instance of the format's.
	if a.tool != "" {
		for _, t := range q.tools.Array() {
			if t.Get("name").Str == a.tool && t.Get("input_schema.properties").IsObject() {
				a.toolArgs = toolInput(t.Get("input_schema"), userText)
			}
		}
	}
	if f := q.outputConfig.Get("format.schema"); a.tool == "" && !a.truncated && f.IsObject() {
		a.structured(f, a.text())
	}
	x := anExtras{omitted: q.think.omitted}
	if q.think.on {
		x.thinking = thinkingText(userText, results)
		if strings.Contains(model, "redacted") {
			x.redacted = redactedData(x.thinking)
		}
	}
	x.input, x.created, x.read = c.s.cacheUsage(&q, promptWords)

	if q.stream.Type == gjson.True {
		streamAnthropic(c, a, &x)
		return
	}
	b := make([]byte, 0, 512)
	b = append(b, `{"id":"msg_`...)
	b = append(b, id...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = appendString(b, model)
	b = append(b, `,"content":[`...)
	if x.thinking != "" {
		b = append(b, `{"type":"thinking","thinking":`...)
		b = appendString(b, x.shown())
		b = append(b, `,"signature":`...)
		b = appendString(b, thinkingSignature(x.shown()))
		b = append(b, "},"...)
		if x.redacted != "" {
			b = append(b, `{"type":"redacted_thinking","data":`...)
			b = appendString(b, x.redacted)
			b = append(b, "},"...)
		}
	}
	if a.tool != "" {
		b = append(b, `{"type":"tool_use","id":"toolu_`...)
		b = append(b, id...)
		b = append(b, `","name":`...)
		b = appendString(b, a.tool)
		b = append(b, `,"input":`...)
		b = append(b, a.toolArgs...)
		b = append(b, '}')
	} else {
		b = append(b, `{"type":"text","text":`...)
		b = appendString(b, a.text())
		b = append(b, '}')
	}
	b = append(b, `],"stop_reason":"`...)
	b = append(b, anthropicStop(a)...)
	b = append(b, `","stop_sequence":null,"usage":`...)
	b = x.appendUsage(b, a.completionTokens(), false)
	b = append(b, '}')
	writeJSON(w, http.StatusOK, b)
}

// anExtras is what an Anthropic answer has beyond the fake's answer: its
// thinking, a redacted_thinking block's data, and the prompt tokens as the
// cache splits them.
type anExtras struct {
	thinking, redacted   string
	input, created, read int
	omitted              bool // display "omitted": the thinking is counted, not shown
}

// shown is the thinking text the answer shows: none when the request asked
// for it omitted.
func (x *anExtras) shown() string {
	if x.omitted {
		return ""
	}
	return x.thinking
}

// appendUsage appends the usage object for an answer of output tokens
// (thinking not included); start writes message_start's, whose
// output_tokens is 1.
func (x *anExtras) appendUsage(b []byte, output int, start bool) []byte {
	thinking := countWords(x.thinking)
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(x.input), 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, int64(x.created), 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, int64(x.read), 10)
	b = append(b, `,"output_tokens":`...)
	if start {
		return append(b, "1}"...)
	}
	b = strconv.AppendInt(b, int64(output+thinking), 10)
	if x.thinking != "" {
		b = append(b, `,"output_tokens_details":{"thinking_tokens":`...)
		b = strconv.AppendInt(b, int64(thinking), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

func anthropicStop(a *answer) string {
	switch {
	case a.tool != "":
		return "tool_use"
	case a.truncated:
		return "max_tokens"
	}
	return "end_turn"
}

// anRequest is a Messages request's top-level fields, read in one pass
// over the body.
type anRequest struct {
	model, maxTokens, messages, system, stopSequences gjson.Result
	temperature, topP, topK, stream, metadata         gjson.Result
	tools, toolChoice                                 gjson.Result
	thinking, outputConfig, cacheControl              gjson.Result
	msgs                                              []gjson.Result
	think                                             anThinking
}

// checkAnthropic validates a Messages request as strictly as the real API
// and returns it parsed, or what is wrong with it.
func checkAnthropic(body []byte) (q anRequest, msg string) {
	if !validJSON(body) || !gjson.ParseBytes(body).IsObject() {
		return q, "the request body is not a JSON object"
	}
	bad := readFields(gjson.ParseBytes(body), []field{
		{"model", &q.model}, {"max_tokens", &q.maxTokens}, {"messages", &q.messages}, {"system", &q.system},
		{"stop_sequences", &q.stopSequences}, {"temperature", &q.temperature}, {"top_p", &q.topP},
		{"top_k", &q.topK}, {"stream", &q.stream}, {"metadata", &q.metadata}, {"tools", &q.tools},
		{"tool_choice", &q.toolChoice}, {"thinking", &q.thinking}, {"output_config", &q.outputConfig},
		{"cache_control", &q.cacheControl},
	}, func(k string) bool { return !anthropicFields[k] })
	if bad != "" {
		return q, bad + ": Extra inputs are not permitted"
	}
	msg = checkAnthropicFields(&q)
	return q, msg
}

// checkAnthropicFields validates the fields of a Messages request.
func checkAnthropicFields(q *anRequest) string {
	if q.model.Type != gjson.String || q.model.Str == "" {
		return "model: Field required"
	}
	if !isInt(q.maxTokens, 1) {
		return "max_tokens: Field required (an integer of at least 1)"
	}
	if t := q.temperature; t.Exists() && (t.Type != gjson.Number || t.Num < 0 || t.Num > 1) {
		return "temperature: must be a number between 0 and 1"
	}
	if t := q.topP; t.Exists() && (t.Type != gjson.Number || t.Num < 0 || t.Num > 1) {
		return "top_p: must be a number between 0 and 1"
	}
	if t := q.topK; t.Exists() && !isInt(t, 0) {
		return "top_k: must be a non-negative integer"
	}
	if st := q.stream; st.Exists() && st.Type != gjson.True && st.Type != gjson.False {
		return "stream: Input should be a valid boolean"
	}
	if md := q.metadata; md.Exists() && !md.IsObject() {
		return "metadata: Input should be an object"
	}
	var msg string
	if q.think, msg = checkThinking(q); msg != "" {
		return msg
	}
	if msg := checkCacheControl("cache_control", q.cacheControl); msg != "" {
		return msg
	}
	if sys := q.system; sys.Exists() {
		if msg := checkBlocks("system", sys, "system"); msg != "" {
			return msg
		}
	}
	if ss := q.stopSequences; ss.Exists() {
		if !ss.IsArray() {
			return "stop_sequences: must be an array of strings"
		}
		for _, s := range ss.Array() {
			if s.Type != gjson.String {
				return "stop_sequences: must be an array of strings"
			}
		}
	}
	if !q.messages.IsArray() {
		return "messages: at least one message is required"
	}
	q.msgs = q.messages.Array()
	if len(q.msgs) == 0 {
		return "messages: at least one message is required"
	}
	// uses are the tool_use ids of the previous message, which the next
	// message must answer, each with a tool_result.
	var uses []string
	for i, m := range q.msgs {
		p := "messages." + strconv.Itoa(i)
		role := m.Get("role").Str
		if !m.IsObject() || (role != "user" && role != "assistant") {
			return p + ".role: Input should be 'user' or 'assistant'"
		}
		if msg := checkBlocks(p+".content", m.Get("content"), role); msg != "" {
			return msg
		}
		var answered, next []string
		for _, b := range m.Get("content").Array() {
			switch b.Get("type").Str {
			case "tool_use":
				next = append(next, b.Get("id").Str)
			case "tool_result":
				if indexOf(uses, b.Get("tool_use_id").Str) < 0 {
					return p + ": unexpected `tool_use_id` found in `tool_result` blocks: " + b.Get("tool_use_id").Str +
						". Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
				}
				answered = append(answered, b.Get("tool_use_id").Str)
			}
		}
		var missing []string
		for _, u := range uses {
			if indexOf(answered, u) < 0 {
				missing = append(missing, u)
			}
		}
		if len(missing) > 0 {
			return p + ": `tool_use` ids were found without `tool_result` blocks immediately after: " + strings.Join(missing, ", ") +
				". Each `tool_use` block must have a corresponding `tool_result` block in the next message."
		}
		uses = next
	}
	if q.think.on {
		if msg := checkThinkingTurn(q.msgs); msg != "" {
			return msg
		}
	}
	var toolNames []string
	if tools := q.tools; tools.Exists() {
		if !tools.IsArray() {
			return "tools: Input should be a valid list"
		}
		for i, t := range tools.Array() {
			p := "tools." + strconv.Itoa(i)
			if t.Get("name").Type != gjson.String || t.Get("name").Str == "" {
				return p + ".name: Field required"
			}
			if typ := t.Get("type").Str; typ != "" && typ != "custom" {
				if msg := checkServerTool(p, t); msg != "" {
					return msg
				}
				toolNames = append(toolNames, t.Get("name").Str)
				continue
			}
			if is := t.Get("input_schema"); !is.IsObject() || is.Get("type").Str != "object" {
				return p + ".input_schema: must be a JSON Schema object with type object"
			}
			if st := t.Get("strict"); st.Exists() && st.Type != gjson.True && st.Type != gjson.False {
				return p + ".strict: Input should be a valid boolean"
			}
			if msg := checkCacheControl(p, t.Get("cache_control")); msg != "" {
				return msg
			}
			toolNames = append(toolNames, t.Get("name").Str)
		}
	}
	if tc := q.toolChoice; tc.Exists() {
		switch tc.Get("type").Str {
		case "auto", "any", "none":
		case "tool":
			name := tc.Get("name").Str
			if name == "" {
				return "tool_choice.name: Field required"
			}
			if indexOf(toolNames, name) < 0 {
				return "tool_choice.name: tool " + strconv.Quote(name) + " is not among the tools"
			}
		default:
			return "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'"
		}
	}
	if n := countBreakpoints(q); n > maxCacheBreakpoints {
		return "A maximum of 4 blocks with cache_control may be provided. Found " + strconv.Itoa(n) + "."
	}
	return ""
}

// countBreakpoints counts the tools and blocks marked with cache_control.
func countBreakpoints(q *anRequest) int {
	n := 0
	count := func(list gjson.Result) {
		for _, b := range list.Array() {
			if b.Get("cache_control").Exists() {
				n++
			}
		}
	}
	count(q.tools)
	count(q.system)
	for _, m := range q.msgs {
		count(m.Get("content"))
	}
	return n
}

// checkBlocks validates a content (or system) value: a string or an array
// of known blocks, each allowed for the role.
func checkBlocks(p string, c gjson.Result, role string) string {
	if c.Type == gjson.String {
		if c.Str == "" && role != "system" {
			return p + ": text content blocks must be non-empty"
		}
		return ""
	}
	if !c.IsArray() {
		return p + ": Input should be a valid string or list"
	}
	for j, b := range c.Array() {
		bp := p + "." + strconv.Itoa(j)
		if msg := checkCacheControl(bp, b.Get("cache_control")); msg != "" {
			return msg
		}
		switch typ := b.Get("type").Str; {
		case typ == "text":
			if t := b.Get("text"); t.Type != gjson.String || t.Str == "" {
				return bp + ".text: text content blocks must be non-empty"
			}
		case role == "system":
			return bp + ".type: system blocks must be text"
		case typ == "image" && (role == "user" || role == "tool_result"):
			if msg := checkSource(bp, b.Get("source"), "base64", "url"); msg != "" {
				return msg
			}
		case typ == "document" && (role == "user" || role == "tool_result"):
			if msg := checkSource(bp, b.Get("source"), "base64", "url", "text", "content"); msg != "" {
				return msg
			}
		case typ == "tool_use" && role == "assistant":
			if b.Get("id").Str == "" || b.Get("name").Str == "" || !b.Get("input").IsObject() {
				return bp + ": tool_use needs id, name and an object input"
			}
		case typ == "tool_result" && role == "user":
			if b.Get("tool_use_id").Str == "" {
				return bp + ".tool_use_id: Field required"
			}
			if rc := b.Get("content"); rc.Exists() && !(rc.Type == gjson.String && rc.Str == "") {
				if msg := checkBlocks(bp+".content", rc, "tool_result"); msg != "" {
					return msg
				}
			}
			if e := b.Get("is_error"); e.Exists() && e.Type != gjson.True && e.Type != gjson.False {
				return bp + ".is_error: Input should be a valid boolean"
			}
		case (typ == "thinking" || typ == "redacted_thinking") && role == "assistant":
			if msg := checkThinkingBlock(bp, b); msg != "" {
				return msg
			}
		default:
			where := "a " + role + " message"
			if role == "tool_result" {
				where = "tool_result content"
			}
			return bp + ".type: block type " + strconv.Quote(typ) + " is not allowed in " + where
		}
	}
	return ""
}

// checkSource checks the source of an image or document block.
func checkSource(bp string, src gjson.Result, types ...string) string {
	typ := src.Get("type").Str
	if indexOf(types, typ) < 0 {
		return bp + ".source.type: Input should be '" + strings.Join(types, "', '") + "'"
	}
	switch typ {
	case "base64":
		if src.Get("media_type").Str == "" || src.Get("data").Str == "" {
			return bp + ".source: base64 sources need media_type and data"
		}
	case "url":
		if src.Get("url").Str == "" {
			return bp + ".source.url: Field required"
		}
	case "text":
		if src.Get("data").Type != gjson.String {
			return bp + ".source.data: Field required"
		}
	case "content":
		if !src.Get("content").Exists() {
			return bp + ".source.content: Field required"
		}
	}
	return ""
}

// streamAnthropic sends the answer as Messages stream events, flushing
// after each.
func streamAnthropic(c *call, a *answer, x *anExtras) {
	c.startSSE()
	model, id := c.model, c.id
	event := func(name string, data []byte) {
		b := make([]byte, 0, len(data)+32)
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, "\ndata: "...)
		b = append(b, data...)
		b = append(b, "\n\n"...)
		c.send(b)
	}
	// ended runs the scripted behaviour due after the first content event
	// and reports whether the stream ends there.
	ended := func() bool { return c.afterFirstWord(anthropicStreamError) }
	start := []byte(`{"type":"message_start","message":{"id":"msg_` + id + `","type":"message","role":"assistant","model":`)
	start = appendString(start, model)
	start = append(start, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	start = x.appendUsage(start, 0, true)
	event("message_start", append(start, "}}"...))
	event("ping", []byte(`{"type": "ping"}`))

	// Thinking comes first: its text word by word, then its signature;
	// a redacted_thinking block comes whole.
	index := 0
	if x.thinking != "" {
		event("content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`))
		for i, w := range strings.Fields(x.shown()) {
			if i > 0 {
				w = " " + w
			}
			d := appendString([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":`), w)
			event("content_block_delta", append(d, "}}"...))
		}
		sig := appendString([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":`), thinkingSignature(x.shown()))
		event("content_block_delta", append(sig, "}}"...))
		event("content_block_stop", []byte(`{"type":"content_block_stop","index":0}`))
		index++
		if x.redacted != "" {
			rd := appendString([]byte(`{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":`), x.redacted)
			event("content_block_start", append(rd, "}}"...))
			event("content_block_stop", []byte(`{"type":"content_block_stop","index":1}`))
			index++
		}
	}
	idx := strconv.Itoa(index)

	if a.tool != "" {
		blk := appendString([]byte(`{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"tool_use","id":"toolu_`+id+`","name":`), a.tool)
		event("content_block_start", append(blk, `,"input":{}}}`...))
		for i, f := range a.argFragments() {
			d := appendString([]byte(`{"type":"content_block_delta","index":`+idx+`,"delta":{"type":"input_json_delta","partial_json":`), f)
			event("content_block_delta", append(d, "}}"...))
			if i == 0 && ended() {
				return
			}
		}
	} else {
		event("content_block_start", []byte(`{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"text","text":""}}`))
		for i := range a.words {
			d := appendString([]byte(`{"type":"content_block_delta","index":`+idx+`,"delta":{"type":"text_delta","text":`), a.chunkWord(i))
			event("content_block_delta", append(d, "}}"...))
			if i == 0 && ended() {
				return
			}
		}
	}
	event("content_block_stop", []byte(`{"type":"content_block_stop","index":`+idx+`}`))
	md := []byte(`{"type":"message_delta","delta":{"stop_reason":"` + anthropicStop(a) + `","stop_sequence":null},"usage":`)
	md = x.appendUsage(md, a.completionTokens(), false)
	event("message_delta", append(md, '}'))
	event("message_stop", []byte(`{"type":"message_stop"}`))
}

// anthropicError writes an Anthropic error body (C.1); request_id repeats
// the request-id header.
func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	b := append([]byte(`{"type":"error","error":{"type":`), appendString(nil, typ)...)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	b = append(b, `},"request_id":`...)
	rid := w.Header().Get("Request-Id")
	if rid == "" {
		rid = "req_fake"
	}
	b = appendString(b, rid)
	b = append(b, '}')
	writeJSON(w, status, b)
}

// anthropicStreamError is the error event a midstream-error stream ends with.
var anthropicStreamError = []byte("event: error\ndata: " + `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n")

// anCountTokens is the Messages API's token count.
const anCountTokens = "/v1/messages/count_tokens"

// countTokens answers POST /v1/messages/count_tokens: {"input_tokens": n},
// n the words of the system prompt and the messages' text, as the fake
// counts a prompt.
func countTokens(c *call) {
	root := gjson.ParseBytes(c.body)
	msgs := root.Get("messages")
	if !validJSON(c.body) || root.Get("model").Str == "" || len(msgs.Array()) == 0 {
		anthropicError(c.w, http.StatusBadRequest, "invalid_request_error", "count_tokens needs a model and messages")
		return
	}
	if c.scripted() {
		return
	}
	n := c.s.promptTokens(contentText(root.Get("system")))
	for _, m := range msgs.Array() {
		n += c.s.promptTokens(contentText(m.Get("content")))
	}
	writeJSON(c.w, http.StatusOK, append(providers.AppendInt([]byte(`{"input_tokens":`), int64(n)), '}'))
}

// serverTools are the versions of Anthropic's server tools the fake
// takes, by type, with the name each must have.
var serverTools = map[string]string{
	"web_search_20250305": "web_search", "web_fetch_20250910": "web_fetch",
}

// checkServerTool checks a server tool as Anthropic does: a type it
// knows, the name that type has, and for web search its options. The
// fake never runs one (as a search that found nothing).
func checkServerTool(p string, t gjson.Result) string {
	typ := t.Get("type").Str
	name, ok := serverTools[typ]
	if !ok {
		return p + ": Input tag '" + typ + "' found using 'type' does not match any of the expected tags"
	}
	if t.Get("name").Str != name {
		return p + ".name: Input should be '" + name + "'"
	}
	if t.Get("input_schema").Exists() {
		return p + ".input_schema: Extra inputs are not permitted"
	}
	if loc := t.Get("user_location"); loc.Exists() && loc.Get("type").Str != "approximate" {
		return p + ".user_location.type: Input should be 'approximate'"
	}
	if d := t.Get("allowed_domains"); d.Exists() && !d.IsArray() {
		return p + ".allowed_domains: Input should be a valid list"
	}
	return ""
}
