package providertest

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/responses"
)

// responsesFormat is OpenAI's Responses API, POST /v1/responses, as OpenAI
// serves it: the format a gateway passes Responses requests through to,
// untouched.
//
// Requests are checked by providers/responses' Parse, whose errors are
// OpenAI's 400s with the param that names the field. (It refuses what no
// chat provider can serve, built-in tools and background responses among
// it; the fake cannot run those either.) Answers are decided as the chat
// formats decide them (decide) and written by providers/responses from the
// equivalent chat completion: a Response, or its event stream. A call of a
// custom tool carries the last user text as its input. A non-streamed
// response with store (the default) is kept in memory, for GET and DELETE
// /v1/responses/{id}; previous_response_id is accepted and has no effect.
type responsesFormat struct{}

func (responsesFormat) name() string { return "openai_responses" }
func (responsesFormat) route(r *http.Request) routing {
	if id, ok := strings.CutPrefix(r.URL.Path, "/v1/responses/"); ok && id != "" && !strings.Contains(id, "/") {
		if r.Method == http.MethodGet || r.Method == http.MethodDelete {
			return served
		}
		return owned
	}
	return postTo(r, "/v1/responses")
}

// model is the body's, or none for GET and DELETE of a stored response.
func (responsesFormat) model(r *http.Request, body []byte) string {
	if r.Method != http.MethodPost {
		return ""
	}
	return modelInBody{}.model(r, body)
}
func (responsesFormat) headers(h http.Header, id string) { h.Set("X-Request-Id", "req_"+id) }

func (responsesFormat) authorized(r *http.Request, want string) bool { return keyOK(bearer(r), want) }

func (responsesFormat) fail(w http.ResponseWriter, r *http.Request, f fault) {
	openAIFormat{}.fail(w, r, f)
}

// openAIOwn removes from a Responses request what OpenAI runs itself and
// the gateway's translator does not (built-in tools such as web_search,
// truncation, background): the fake answers as if they were not there,
// as OpenAI answers a request whose built-in tools found nothing to do.
func openAIOwn(body []byte) []byte {
	for _, f := range []string{"truncation", "background"} {
		body, _ = sjson.DeleteBytes(body, f)
	}
	tools := gjson.GetBytes(body, "tools")
	if !tools.IsArray() {
		return body
	}
	kept := []byte{'['}
	for _, t := range tools.Array() {
		if ty := t.Get("type").Str; ty == "function" || ty == "custom" {
			if len(kept) > 1 {
				kept = append(kept, ',')
			}
			kept = append(kept, t.Raw...)
		}
	}
	body, _ = sjson.SetRawBytes(body, "tools", append(kept, ']'))
	return body
}

func (responsesFormat) serve(c *call) {
	if c.r.Method != http.MethodPost {
		storedResponse(c)
		return
	}
	req, err := responses.Parse(openAIOwn(c.body))
	if err != nil {
		var e *providers.Error
		if !errors.As(err, &e) {
			e = &providers.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: err.Error()}
		}
		writeJSON(c.w, e.Status, e.JSON())
		return
	}
	if c.scripted() {
		return
	}
	x, err := responses.Translator{}.New(req, nil)
	if err != nil {
		var e *providers.Error
		if errors.As(err, &e) {
			writeJSON(c.w, e.Status, e.JSON())
		} else {
			openAIError(c.w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		}
		return
	}
	body := gjson.ParseBytes(c.body)
	a, custom, userText := decideResponses(body, c.s.promptTokens, textOnly(c.model))
	if f := body.Get("text.format"); a.tool == "" {
		switch f.Get("type").Str {
		case "json_schema":
			a.structured(f.Get("schema"), a.text())
		case "json_object":
			a.structured(gjson.Result{}, a.text())
		}
	}
	args := string(a.toolArgs)
	if custom {
		args = `{"` + responses.CustomInputParam + `":` + string(appendString(nil, userText)) + `}`
	}

	if !req.Info().Stream {
		chat := make([]byte, 0, 512)
		chat = append(chat, `{"id":"chatcmpl-`+c.id+`","object":"chat.completion","created":`...)
		chat = strconv.AppendInt(chat, time.Now().Unix(), 10)
		chat = append(chat, `,"model":`...)
		chat = appendString(chat, c.model)
		chat = append(chat, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
		if a.tool != "" {
			chat = append(chat, `null,"tool_calls":[{"id":"call_`+c.id+`","type":"function","function":{"name":`...)
			chat = appendString(chat, a.tool)
			chat = append(chat, `,"arguments":`...)
			chat = appendString(chat, args)
			chat = append(chat, `}}]`...)
		} else {
			chat = appendString(chat, a.text())
		}
		chat = append(chat, `},"finish_reason":`...)
		chat = append(chat, openAIFinish(a)...)
		chat = append(chat, `}],"usage":`...)
		chat = appendOpenAIUsage(chat, a)
		chat = append(chat, '}')
		out, err := x.Response(chat)
		if err != nil {
			openAIError(c.w, http.StatusInternalServerError, "server_error", "", err.Error())
			return
		}
		if req.Info().Store {
			c.s.mu.Lock()
			if c.s.stored == nil {
				c.s.stored = make(map[string][]byte)
			}
			c.s.stored[gjson.GetBytes(out, "id").Str] = out
			c.s.mu.Unlock()
		}
		writeJSON(c.w, http.StatusOK, out)
		return
	}

	// A stream: the answer as chat chunks, each translated as it goes.
	c.startSSE()
	st := x.Stream()
	chunk := func(delta, finish string) {
		b := make([]byte, 0, 256)
		b = append(b, `data: {"id":"chatcmpl-`+c.id+`","object":"chat.completion.chunk","model":`...)
		b = appendString(b, c.model)
		b = append(b, `,"choices":[{"index":0,"delta":`...)
		b = append(b, delta...)
		b = append(b, `,"finish_reason":`...)
		b = append(b, finish...)
		b = append(b, "}]}\n\n"...)
		c.send(st.Events(nil, b))
	}
	ended := func() bool {
		var errEvent []byte
		if strings.Contains(c.model, "midstream-error") {
			errEvent = st.Fail(nil, &providers.Error{Type: "server_error", Message: "the server had an error while processing your request"})
		}
		return c.afterFirstWord(errEvent)
	}
	if a.tool != "" {
		a.toolArgs = []byte(args)
	}
	if !openAIDeltas(a, c.id, chunk, ended) {
		return
	}
	chunk(`{}`, openAIFinish(a))
	b := []byte(`data: {"id":"chatcmpl-` + c.id + `","object":"chat.completion.chunk","choices":[],"usage":`)
	b = appendOpenAIUsage(b, a)
	b = append(b, "}\n\n"...)
	out := st.Events(nil, b)
	out, _ = st.Event(out, []byte("data: [DONE]"))
	c.send(st.Close(out))
}

// decideResponses decides the answer to a Responses request, as the chat
// formats decide theirs: from the last user text, the tool outputs that
// end the input, the function and custom tools offered and tool_choice.
// custom says the tool called is a custom one.
func decideResponses(body gjson.Result, count func(string) int, toolsOff bool) (a *answer, custom bool, userText string) {
	promptWords := count(body.Get("instructions").Str)
	userLast := false
	var results []string
	items := body.Get("input")
	if items.Type == gjson.String {
		userText, userLast = items.Str, true
		promptWords += count(items.Str)
		items = gjson.Result{}
	}
	items.ForEach(func(_, it gjson.Result) bool {
		typ := it.Get("type").Str
		if typ == "" && it.Get("role").Exists() {
			typ = "message"
		}
		switch typ {
		case "message":
			text := itemText(it.Get("content"))
			promptWords += count(text)
			if it.Get("role").Str == "user" {
				userText, userLast, results = text, true, results[:0]
			} else {
				userLast, results = false, results[:0]
			}
		case "function_call_output", "custom_tool_call_output":
			text := itemText(it.Get("output"))
			promptWords += count(text)
			userLast, results = false, append(results, text)
		default:
			userLast, results = false, results[:0]
		}
		return true
	})
	var tools []string
	customs := map[string]bool{}
	schemas := map[string]gjson.Result{}
	body.Get("tools").ForEach(func(_, t gjson.Result) bool {
		switch t.Get("type").Str {
		case "function", "custom":
			tools = append(tools, t.Get("name").Str)
			customs[t.Get("name").Str] = t.Get("type").Str == "custom"
			schemas[t.Get("name").Str] = t.Get("parameters")
		}
		return true
	})
	tc := body.Get("tool_choice")
	a = decide(userText, strings.Join(results, " "), len(results) > 0, userLast,
		tools, tc.Get("name").Str, tc.Str == "none" || toolsOff, body.Get("max_output_tokens").Int(), promptWords)
	// A function's arguments are an instance of its parameters schema
	// when it names properties, as Anthropic's tool inputs are.
	if s := schemas[a.tool]; a.tool != "" && !customs[a.tool] && s.Get("properties").IsObject() {
		a.toolArgs = toolInput(s, userText)
	}
	return a, a.tool != "" && customs[a.tool], userText
}

// itemText is the text of a message's content or a tool output: the
// string, or its text parts joined with spaces.
func itemText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	var parts []string
	c.ForEach(func(_, p gjson.Result) bool {
		if t := p.Get("text"); t.Type == gjson.String {
			parts = append(parts, t.Str)
		}
		return true
	})
	return strings.Join(parts, " ")
}

// storedResponse answers GET and DELETE /v1/responses/{id}.
func storedResponse(c *call) {
	id := strings.TrimPrefix(c.r.URL.Path, "/v1/responses/")
	c.s.mu.Lock()
	out, ok := c.s.stored[id]
	if ok && c.r.Method == http.MethodDelete {
		delete(c.s.stored, id)
	}
	c.s.mu.Unlock()
	switch {
	case !ok:
		openAIError(c.w, http.StatusNotFound, "invalid_request_error", "", "Response with id '"+id+"' not found.")
	case c.r.Method == http.MethodDelete:
		writeJSON(c.w, http.StatusOK, responses.Deleted(id))
	default:
		writeJSON(c.w, http.StatusOK, out)
	}
}
