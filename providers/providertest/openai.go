package providertest

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

var openAIRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request, body []byte, id string) {
	scheme, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if scheme != "Bearer" || key == "" || (s.opts.OpenAIKey != "" && key != s.opts.OpenAIKey) {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
		return
	}
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.")
		return
	}
	req := gjson.ParseBytes(body)
	model := req.Get("model")
	if model.Type != gjson.String || model.Str == "" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "you must provide a model parameter")
		return
	}
	msgs := req.Get("messages").Array()
	if len(msgs) == 0 {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "messages must be a non-empty array")
		return
	}
	promptWords := 0
	for i, m := range msgs {
		if !openAIRoles[m.Get("role").Str] {
			openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "invalid role in messages["+strconv.Itoa(i)+"]")
			return
		}
		promptWords += countWords(contentText(m.Get("content")))
	}
	if scripted(w, model.Str, false) {
		return
	}

	last := msgs[len(msgs)-1]
	var tools []string
	for _, t := range req.Get("tools").Array() {
		tools = append(tools, t.Get("function.name").Str)
	}
	tc := req.Get("tool_choice")
	maxTokens := req.Get("max_completion_tokens").Int()
	if maxTokens == 0 {
		maxTokens = req.Get("max_tokens").Int()
	}
	a := decide(contentText(last.Get("content")), contentText(last.Get("content")), last.Get("role").Str == "tool",
		tools, tc.Get("function.name").Str, tc.Str == "none", maxTokens, promptWords)

	if req.Get("stream").Type == gjson.True {
		s.streamOpenAI(w, r, model.Str, id, a, req.Get("stream_options.include_usage").Type == gjson.True)
		return
	}
	b := make([]byte, 0, 768)
	b = append(b, `{"id":"chatcmpl-`...)
	b = append(b, id...)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"model":`...)
	b = appendString(b, model.Str)
	b = append(b, `,"system_fingerprint":"fp_fake","choices":[{"index":0,"message":{"role":"assistant","content":`...)
	if a.tool != "" {
		b = append(b, `null,"refusal":null,"tool_calls":[{"id":"call_`...)
		b = append(b, id...)
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
	writeJSON(w, http.StatusOK, b)
}

// contentText is the text of a message's content in either format: the
// string, or its text parts (blocks) joined with spaces.
func contentText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	var parts []string
	for _, p := range c.Array() {
		if p.Get("type").Str == "text" {
			parts = append(parts, p.Get("text").Str)
		}
	}
	return strings.Join(parts, " ")
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
func (s *Server) streamOpenAI(w http.ResponseWriter, r *http.Request, model, id string, a *answer, includeUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
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
		_, _ = w.Write(b)
		flush(w)
	}
	// ended runs the scripted behaviour due after the first content event
	// and reports whether the stream ends there.
	ended := func() bool {
		switch s.afterFirstWord(r, model) {
		case streamFails:
			_, _ = w.Write([]byte(`data: {"error":{"message":"the server had an error while processing your request","type":"server_error","param":null,"code":null}}` + "\n\n"))
			return true
		case streamCut:
			return true
		}
		return false
	}
	chunk(`{"role":"assistant","content":"","refusal":null}`, "null")

	if a.tool != "" {
		first := appendString([]byte(`{"tool_calls":[{"index":0,"id":"call_`+id+`","type":"function","function":{"name":`), a.tool)
		chunk(string(first)+`,"arguments":""}}]}`, "null")
		for i, f := range a.argFragments() {
			chunk(string(appendString([]byte(`{"tool_calls":[{"index":0,"function":{"arguments":`), f))+`}}]}`, "null")
			if i == 0 && ended() {
				return
			}
		}
	} else {
		for i := range a.words {
			chunk(string(appendString([]byte(`{"content":`), a.chunkWord(i)))+`}`, "null")
			if i == 0 && ended() {
				return
			}
		}
	}
	chunk(`{}`, openAIFinish(a))
	if includeUsage {
		b := []byte(`data: {"id":"chatcmpl-` + id + `","object":"chat.completion.chunk","created":` + created + `,"model":`)
		b = appendString(b, model)
		b = append(b, `,"system_fingerprint":"fp_fake","choices":[],"usage":`...)
		b = appendOpenAIUsage(b, a)
		b = append(b, "}\n\n"...)
		_, _ = w.Write(b)
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	flush(w)
}

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

func writeJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
