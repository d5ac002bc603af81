package providertest

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

var openAIRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// anthropicOnlyFields are top-level fields of Anthropic's Messages API that
// OpenAI's chat completions do not have: OpenAI rejects them, and so does
// the fake, to catch a gateway that sends the wrong format. (Fields that
// other OpenAI-compatible servers accept, such as top_k, are let through.)
var anthropicOnlyFields = map[string]bool{
	"system": true, "stop_sequences": true, "anthropic_version": true, "max_tokens_to_sample": true,
}

// oaRequest is a chat completions request's top-level fields, read in one
// pass over the body.
type oaRequest struct {
	model, messages, stream, streamOptions                  gjson.Result
	temperature, topP, frequencyPenalty, presencePenalty    gjson.Result
	maxTokens, maxCompletionTokens, n, stop, responseFormat gjson.Result
	tools, toolChoice, parallelToolCalls                    gjson.Result
	msgs                                                    []gjson.Result
}

// openAIFormat is OpenAI's chat completions, and the fake's default error
// shape.
type openAIFormat struct{ modelInBody }

func (openAIFormat) name() string                     { return "openai" }
func (openAIFormat) route(r *http.Request) routing    { return postTo(r, "/v1/chat/completions") }
func (openAIFormat) headers(h http.Header, id string) { h.Set("X-Request-Id", "req_"+id) }

func (openAIFormat) authorized(r *http.Request, want string) bool { return keyOK(bearer(r), want) }

func (openAIFormat) fail(w http.ResponseWriter, r *http.Request, f fault) {
	typ, code, msg := "invalid_request_error", "", ""
	switch f {
	case notFound:
		code, msg = "unknown_url", "Invalid URL ("+r.Method+" "+r.URL.Path+")"
	case tooLarge:
		msg = msgTooLarge
	case unreadable:
		msg = msgUnreadable
	case unauthorized:
		code, msg = "invalid_api_key", "Incorrect API key provided."
	case rateLimited:
		typ, code, msg = "rate_limit_error", "rate_limit_exceeded", "rate limit reached"
	case serverError:
		typ, msg = "server_error", "internal server error"
	case overloaded:
		typ, msg = "server_error", "the engine is overloaded"
	}
	openAIError(w, f.status(), typ, code, msg)
}

func (openAIFormat) serve(c *call) {
	q, param, msg := checkOpenAI(c.body)
	if msg != "" {
		openAIParamError(c.w, http.StatusBadRequest, param, msg)
		return
	}
	if c.scripted() {
		return
	}
	msgs, model := q.msgs, q.model

	promptWords, userText, userLast, results := chatConversation(msgs, contentText, c.s.promptTokens)
	var tools []string
	for _, t := range q.tools.Array() {
		if t.Get("type").Str == "function" {
			tools = append(tools, t.Get("function.name").Str)
		}
	}
	tc := q.toolChoice
	maxTokens := q.maxCompletionTokens.Int()
	if maxTokens == 0 {
		maxTokens = q.maxTokens.Int()
	}
	a := decide(userText, strings.Join(results, " "), len(results) > 0, userLast,
		tools, tc.Get("function.name").Str, tc.Str == "none" || textOnly(model.Str), maxTokens, promptWords)
	if rf := gjson.GetBytes(c.body, "response_format"); a.tool == "" {
		switch rf.Get("type").Str {
		case "json_schema":
			a.structured(rf.Get("json_schema.schema"), a.text())
		case "json_object":
			a.structured(gjson.Result{}, a.text())
		}
	}

	if q.stream.Type == gjson.True {
		streamOpenAI(c, a, q.streamOptions.Get("include_usage").Type == gjson.True)
		return
	}
	b := make([]byte, 0, 768)
	b = append(b, `{"id":"chatcmpl-`...)
	b = append(b, c.id...)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"model":`...)
	b = appendString(b, model.Str)
	b = append(b, `,"system_fingerprint":"fp_fake","choices":[{"index":0,"message":{"role":"assistant","content":`...)
	if a.tool != "" {
		b = append(b, `null,"refusal":null,"tool_calls":[{"id":"call_`...)
		b = append(b, c.id...)
		b = append(b, `","type":"function","function":{"name":`...)
		b = appendString(b, a.tool)
		b = append(b, `,"arguments":`...)
		b = appendString(b, string(a.toolArgs))
		b = append(b, `}}]`...)
	} else {
		b = appendString(b, a.text())
		b = append(b, `,"refusal":null`...)
	}
	b = append(b, `,"annotations":[]},"logprobs":null,"finish_reason":`...)
	b = append(b, openAIFinish(a)...)
	b = append(b, `}],"usage":`...)
	b = appendOpenAIUsage(b, a)
	b = append(b, `,"service_tier":"default"}`...)
	writeJSON(c.w, http.StatusOK, b)
}

// checkOpenAI validates a chat completions request as strictly as OpenAI
// does (A.1) and returns it parsed, or the offending parameter and what is
// wrong with it.
func checkOpenAI(body []byte) (q oaRequest, param, msg string) {
	if !validJSON(body) || !gjson.ParseBytes(body).IsObject() {
		return q, "", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"
	}
	leaked := readFields(gjson.ParseBytes(body), []field{
		{"model", &q.model}, {"messages", &q.messages}, {"stream", &q.stream}, {"stream_options", &q.streamOptions},
		{"temperature", &q.temperature}, {"top_p", &q.topP}, {"frequency_penalty", &q.frequencyPenalty},
		{"presence_penalty", &q.presencePenalty}, {"max_tokens", &q.maxTokens},
		{"max_completion_tokens", &q.maxCompletionTokens}, {"n", &q.n}, {"stop", &q.stop},
		{"response_format", &q.responseFormat}, {"tools", &q.tools}, {"tool_choice", &q.toolChoice},
		{"parallel_tool_calls", &q.parallelToolCalls},
	}, func(k string) bool { return anthropicOnlyFields[k] })
	if leaked != "" {
		return q, leaked, "Unrecognized request argument supplied: " + leaked
	}
	if q.model.Type != gjson.String || q.model.Str == "" {
		return q, "model", "you must provide a model parameter"
	}
	if p, m := checkOpenAIParams(&q); m != "" {
		return q, p, m
	}
	if !q.messages.IsArray() {
		return q, "messages", "Invalid type for 'messages': expected an array of objects."
	}
	msgs := q.messages.Array()
	if len(msgs) == 0 {
		return q, "messages", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."
	}
	// pending holds the tool_call ids of the latest assistant message that
	// no tool message has answered yet.
	var pending []string
	for i, m := range msgs {
		p := "messages[" + strconv.Itoa(i) + "]"
		if !m.IsObject() {
			return q, p, "Invalid type for '" + p + "': expected an object."
		}
		role := m.Get("role").Str
		if !openAIRoles[role] {
			return q, p + ".role", "Invalid value for '" + p + ".role': " + strconv.Quote(m.Get("role").String()) +
				". Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'."
		}
		if role == "tool" {
			id := m.Get("tool_call_id")
			if id.Type != gjson.String || id.Str == "" {
				return q, p + ".tool_call_id", "Missing required parameter: '" + p + ".tool_call_id'."
			}
			j := indexOf(pending, id.Str)
			if j < 0 {
				return q, p + ".role", "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'." //nolint:misspell // OpenAI's message, verbatim
			}
			pending = append(pending[:j], pending[j+1:]...)
		} else if len(pending) > 0 {
			return q, "messages", "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: " + strings.Join(pending, ", ")
		}
		if pp, mm := checkOpenAIContent(p, role, m.Get("content")); mm != "" {
			return q, pp, mm
		}
		if role != "assistant" {
			continue
		}
		calls := m.Get("tool_calls")
		if calls.Exists() && calls.Type != gjson.Null && !calls.IsArray() {
			return q, p + ".tool_calls", "Invalid type for '" + p + ".tool_calls': expected an array."
		}
		for j, c := range calls.Array() {
			cp := p + ".tool_calls[" + strconv.Itoa(j) + "]"
			if c.Get("id").Type != gjson.String || c.Get("id").Str == "" {
				return q, cp + ".id", "Missing required parameter: '" + cp + ".id'."
			}
			if c.Get("type").Str != "function" || c.Get("function.name").Str == "" {
				return q, cp + ".function", "'" + cp + "' must be a function call with a name."
			}
			// arguments is a JSON-encoded string, never an object.
			if c.Get("function.arguments").Type != gjson.String {
				return q, cp + ".function.arguments", "Invalid type for '" + cp + ".function.arguments': expected a string."
			}
			pending = append(pending, c.Get("id").Str)
		}
		if c := m.Get("content"); (!c.Exists() || c.Type == gjson.Null) && len(calls.Array()) == 0 &&
			!m.Get("refusal").Exists() && !m.Get("audio").Exists() && !m.Get("function_call").Exists() {
			return q, p + ".content", "Invalid value for '" + p + ".content': expected a string, got null."
		}
	}
	if len(pending) > 0 && msgs[len(msgs)-1].Get("role").Str == "tool" {
		return q, "messages", "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: " + strings.Join(pending, ", ")
	}
	q.msgs = msgs
	return q, "", ""
}

// checkOpenAIParams checks the optional top-level parameters.
func checkOpenAIParams(q *oaRequest) (param, msg string) {
	if v := q.stream; isSet(v) && v.Type != gjson.True && v.Type != gjson.False {
		return "stream", "Invalid type for 'stream': expected a boolean."
	}
	if isSet(q.streamOptions) && q.stream.Type != gjson.True {
		return "stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled."
	}
	for _, r := range [...]struct {
		name     string
		v        gjson.Result
		min, max float64
	}{
		{"temperature", q.temperature, 0, 2}, {"top_p", q.topP, 0, 1},
		{"frequency_penalty", q.frequencyPenalty, -2, 2}, {"presence_penalty", q.presencePenalty, -2, 2},
	} {
		if isSet(r.v) && (r.v.Type != gjson.Number || r.v.Num < r.min || r.v.Num > r.max) {
			return r.name, "Invalid '" + r.name + "': expected a number between " +
				strconv.FormatFloat(r.min, 'g', -1, 64) + " and " + strconv.FormatFloat(r.max, 'g', -1, 64) + "."
		}
	}
	for _, r := range [...]struct {
		name string
		v    gjson.Result
	}{{"max_tokens", q.maxTokens}, {"max_completion_tokens", q.maxCompletionTokens}, {"n", q.n}} {
		if isSet(r.v) && !isInt(r.v, 1) {
			return r.name, "Invalid '" + r.name + "': expected an integer of at least 1."
		}
	}
	if v := q.stop; isSet(v) && v.Type != gjson.String {
		stops := v.Array()
		if !v.IsArray() || len(stops) > 4 {
			return "stop", "Invalid 'stop': expected a string or an array of at most 4 strings."
		}
		for _, s := range stops {
			if s.Type != gjson.String {
				return "stop", "Invalid 'stop': expected a string or an array of at most 4 strings."
			}
		}
	}
	if v := q.responseFormat; isSet(v) {
		switch v.Get("type").Str {
		case "text", "json_object":
		case "json_schema":
			if v.Get("json_schema.name").Str == "" {
				return "response_format.json_schema.name", "Missing required parameter: 'response_format.json_schema.name'."
			}
		default:
			return "response_format.type", "Invalid value for 'response_format.type': supported values are 'text', 'json_object' and 'json_schema'."
		}
	}
	hasTools := false
	if tools := q.tools; isSet(tools) {
		if !tools.IsArray() {
			return "tools", "Invalid type for 'tools': expected an array."
		}
		i := 0
		tools.ForEach(func(_, t gjson.Result) bool {
			p := "tools[" + strconv.Itoa(i) + "]"
			i++
			switch t.Get("type").Str {
			case "function":
				if n := t.Get("function.name"); n.Type != gjson.String || n.Str == "" {
					param, msg = p+".function.name", "Missing required parameter: '"+p+".function.name'."
				} else if ps := t.Get("function.parameters"); ps.Exists() && !ps.IsObject() {
					param, msg = p+".function.parameters", "Invalid type for '"+p+".function.parameters': expected an object."
				}
			case "custom":
				if t.Get("custom.name").Str == "" {
					param, msg = p+".custom.name", "Missing required parameter: '"+p+".custom.name'."
				}
			default:
				param, msg = p+".type", "Invalid value for '"+p+".type': supported values are 'function' and 'custom'."
			}
			return msg == ""
		})
		if msg != "" {
			return param, msg
		}
		hasTools = i > 0
	}
	if isSet(q.toolChoice) && !hasTools {
		return "tool_choice", "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."
	}
	if isSet(q.parallelToolCalls) && !hasTools {
		return "parallel_tool_calls", "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are specified."
	}
	if tc := q.toolChoice; isSet(tc) {
		switch {
		case tc.Type == gjson.String:
			if tc.Str != "none" && tc.Str != "auto" && tc.Str != "required" {
				return "tool_choice", "Invalid value for 'tool_choice': supported values are 'none', 'auto' and 'required', or a named tool."
			}
		case tc.Get("type").Str == "function":
			if tc.Get("function.name").Str == "" {
				return "tool_choice.function.name", "Missing required parameter: 'tool_choice.function.name'."
			}
		case tc.Get("type").Str == "allowed_tools", tc.Get("type").Str == "custom":
		default:
			return "tool_choice", "Invalid value for 'tool_choice'."
		}
	}
	return "", ""
}

// checkOpenAIContent checks a message's content against what its role may
// carry.
func checkOpenAIContent(p, role string, c gjson.Result) (param, msg string) {
	p += ".content"
	switch {
	case c.Type == gjson.String:
		return "", ""
	case !c.Exists() || c.Type == gjson.Null:
		if role == "assistant" {
			return "", "" // checked with tool_calls
		}
		return p, "Missing required parameter: '" + p + "'."
	case !c.IsArray():
		return p, "Invalid type for '" + p + "': expected one of a string or an array of objects."
	}
	for j, part := range c.Array() {
		pp := p + "[" + strconv.Itoa(j) + "]"
		typ := part.Get("type").Str
		ok := false
		switch typ {
		case "text":
			if part.Get("text").Type != gjson.String {
				return pp + ".text", "Missing required parameter: '" + pp + ".text'."
			}
			ok = true
		case "image_url":
			if part.Get("image_url.url").Type != gjson.String {
				return pp + ".image_url.url", "Missing required parameter: '" + pp + ".image_url.url'."
			}
			ok = role == "user"
		case "input_audio", "file":
			ok = role == "user" && part.Get(typ).IsObject()
		case "refusal":
			ok = role == "assistant"
		}
		if !ok {
			return pp + ".type", "Invalid value: " + strconv.Quote(typ) + ". Supported values for a " + role + " message part are: " + openAIPartTypes[role] + "."
		}
	}
	return "", ""
}

var openAIPartTypes = map[string]string{
	"system": "'text'", "developer": "'text'", "tool": "'text'",
	"user": "'text', 'image_url', 'input_audio' and 'file'", "assistant": "'text' and 'refusal'",
}

func openAIFinish(a *answer) string {
	switch {
	case a.tool != "":
		return `"tool_calls"`
	case a.truncated:
		return `"length"`
	}
	return `"stop"`
}

func appendOpenAIUsage(b []byte, a *answer) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(a.promptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(a.completionTokens()), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(a.promptTokens+a.completionTokens()), 10)
	return append(b, `,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
}

// streamOpenAI sends the answer as chat.completion.chunk events, flushing
// after each.
func streamOpenAI(c *call, a *answer, includeUsage bool) {
	c.startSSE()
	model, id := c.model, c.id
	created := strconv.FormatInt(time.Now().Unix(), 10)
	chunk := func(delta, finish string) {
		b := make([]byte, 0, 256)
		b = append(b, `data: {"id":"chatcmpl-`...)
		b = append(b, id...)
		b = append(b, `","object":"chat.completion.chunk","created":`...)
		b = append(b, created...)
		b = append(b, `,"model":`...)
		b = appendString(b, model)
		b = append(b, `,"system_fingerprint":"fp_fake","choices":[{"index":0,"delta":`...)
		b = append(b, delta...)
		b = append(b, `,"logprobs":null,"finish_reason":`...)
		b = append(b, finish...)
		b = append(b, `}]`...)
		if includeUsage {
			b = append(b, `,"usage":null`...)
		}
		b = append(b, "}\n\n"...)
		c.send(b)
	}
	// ended runs the scripted behaviour due after the first content event
	// and reports whether the stream ends there.
	ended := func() bool { return c.afterFirstWord(openAIStreamError) }
	chunk(`{"role":"assistant","content":"","refusal":null}`, "null")

	if !openAIDeltas(a, id, chunk, ended) {
		return
	}
	chunk(`{}`, openAIFinish(a))
	if includeUsage {
		b := []byte(`data: {"id":"chatcmpl-` + id + `","object":"chat.completion.chunk","created":` + created + `,"model":`)
		b = appendString(b, model)
		b = append(b, `,"system_fingerprint":"fp_fake","choices":[],"usage":`...)
		b = appendOpenAIUsage(b, a)
		b = append(b, "}\n\n"...)
		_, _ = c.w.Write(b)
	}
	c.send([]byte("data: [DONE]\n\n"))
}

// openAIDeltas streams a's tool call (id call_<id>) or its words as chunk
// deltas, with ended checked after the first; it reports false when the
// stream ended there.
func openAIDeltas(a *answer, id string, chunk func(delta, finish string), ended func() bool) bool {
	if a.tool != "" {
		first := appendString([]byte(`{"tool_calls":[{"index":0,"id":"call_`+id+`","type":"function","function":{"name":`), a.tool)
		chunk(string(first)+`,"arguments":""}}]}`, "null")
		for i, f := range a.argFragments() {
			chunk(string(appendString([]byte(`{"tool_calls":[{"index":0,"function":{"arguments":`), f))+`}}]}`, "null")
			if i == 0 && ended() {
				return false
			}
		}
		return true
	}
	for i := range a.words {
		chunk(string(appendString([]byte(`{"content":`), a.chunkWord(i)))+`}`, "null")
		if i == 0 && ended() {
			return false
		}
	}
	return true
}

// openAIParamError writes an invalid_request_error naming the offending
// parameter, as OpenAI does for a 400.
func openAIParamError(w http.ResponseWriter, status int, param, msg string) {
	b := append([]byte(`{"error":{"message":`), appendString(nil, msg)...)
	b = append(b, `,"type":"invalid_request_error","param":`...)
	if param == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, param)
	}
	b = append(b, `,"code":null}}`...)
	writeJSON(w, status, b)
}

// openAIError writes an OpenAI error body (A.2); an empty code is null.
func openAIError(w http.ResponseWriter, status int, typ, code, msg string) {
	b := append([]byte(`{"error":{"message":`), appendString(nil, msg)...)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"param":null,"code":`...)
	if code == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, code)
	}
	b = append(b, "}}"...)
	writeJSON(w, status, b)
}

// openAIStreamError is the error event a midstream-error stream ends with.
var openAIStreamError = []byte("data: " + `{"error":{"message":"the server had an error while processing your request","type":"server_error","param":null,"code":null}}` + "\n\n")
