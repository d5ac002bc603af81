package providertest

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// anthropicFields are the top-level fields the Messages API accepts; any
// other (an OpenAI field a gateway forgot to translate) is a 400, as it is
// at Anthropic.
var anthropicFields = map[string]bool{
	"model": true, "max_tokens": true, "messages": true, "system": true, "stop_sequences": true,
	"temperature": true, "top_p": true, "top_k": true, "stream": true, "metadata": true,
	"tools": true, "tool_choice": true, "thinking": true, "service_tier": true,
}

func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request, body []byte, id string) {
	key := r.Header.Get("X-Api-Key")
	if key == "" || (s.opts.AnthropicKey != "" && key != s.opts.AnthropicKey) {
		anthropicError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	if r.Header.Get("Authorization") != "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "send the API key as x-api-key only; an Authorization header is an OAuth token")
		return
	}
	if r.Header.Get("Anthropic-Version") == "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	if msg := checkAnthropic(body); msg != "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	req := gjson.ParseBytes(body)
	model := req.Get("model").Str
	if scripted(w, model, true) {
		return
	}

	promptWords := countWords(contentText(req.Get("system")))
	msgs := req.Get("messages").Array()
	for _, m := range msgs {
		promptWords += countWords(contentText(m.Get("content")))
	}
	last := msgs[len(msgs)-1]
	userText, toolResult, isToolResult := contentText(last.Get("content")), "", false
	if last.Get("role").Str == "user" && userText == "" {
		for _, blk := range last.Get("content").Array() {
			if blk.Get("type").Str == "tool_result" {
				isToolResult = true
				toolResult = contentText(blk.Get("content"))
			}
		}
	}
	var tools []string
	for _, t := range req.Get("tools").Array() {
		tools = append(tools, t.Get("name").Str)
	}
	tc := req.Get("tool_choice")
	a := decide(userText, toolResult, isToolResult, tools, tc.Get("name").Str, tc.Get("type").Str == "none",
		req.Get("max_tokens").Int(), promptWords)

	if req.Get("stream").Type == gjson.True {
		s.streamAnthropic(w, r, model, id, a)
		return
	}
	b := make([]byte, 0, 512)
	b = append(b, `{"id":"msg_`...)
	b = append(b, id...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = appendString(b, model)
	b = append(b, `,"content":[`...)
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
	b = append(b, `","stop_sequence":null,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(a.promptTokens), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(a.completionTokens()), 10)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`...)
	writeJSON(w, http.StatusOK, b)
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

// checkAnthropic validates a Messages request as strictly as the real API
// and returns what is wrong with it, or "".
func checkAnthropic(body []byte) string {
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		return "the request body is not a JSON object"
	}
	req := gjson.ParseBytes(body)
	var bad string
	req.ForEach(func(k, _ gjson.Result) bool {
		if !anthropicFields[k.Str] {
			bad = k.Str + ": Extra inputs are not permitted"
		}
		return bad == ""
	})
	if bad != "" {
		return bad
	}
	if m := req.Get("model"); m.Type != gjson.String || m.Str == "" {
		return "model: Field required"
	}
	if mt := req.Get("max_tokens"); mt.Type != gjson.Number || mt.Int() < 1 || strings.ContainsAny(mt.Raw, ".eE") {
		return "max_tokens: Field required (an integer of at least 1)"
	}
	if t := req.Get("temperature"); t.Exists() && (t.Type != gjson.Number || t.Num < 0 || t.Num > 1) {
		return "temperature: must be a number between 0 and 1"
	}
	if sys := req.Get("system"); sys.Exists() {
		if msg := checkBlocks("system", sys, "system"); msg != "" {
			return msg
		}
	}
	if ss := req.Get("stop_sequences"); ss.Exists() {
		if !ss.IsArray() {
			return "stop_sequences: must be an array of strings"
		}
		for _, s := range ss.Array() {
			if s.Type != gjson.String {
				return "stop_sequences: must be an array of strings"
			}
		}
	}
	msgs := req.Get("messages")
	if !msgs.IsArray() || len(msgs.Array()) == 0 {
		return "messages: at least one message is required"
	}
	toolUses := map[string]bool{}
	for i, m := range msgs.Array() {
		p := "messages." + strconv.Itoa(i)
		role := m.Get("role").Str
		if role != "user" && role != "assistant" {
			return p + ".role: Input should be 'user' or 'assistant'"
		}
		if msg := checkBlocks(p+".content", m.Get("content"), role); msg != "" {
			return msg
		}
		for _, b := range m.Get("content").Array() {
			switch b.Get("type").Str {
			case "tool_use":
				toolUses[b.Get("id").Str] = true
			case "tool_result":
				if !toolUses[b.Get("tool_use_id").Str] {
					return p + ": tool_result block(s) provided when previous message does not contain tool_use block(s)"
				}
			}
		}
	}
	if tools := req.Get("tools"); tools.Exists() {
		for i, t := range tools.Array() {
			p := "tools." + strconv.Itoa(i)
			if t.Get("name").Type != gjson.String || t.Get("name").Str == "" {
				return p + ".name: Field required"
			}
			if is := t.Get("input_schema"); !is.IsObject() || is.Get("type").Str != "object" {
				return p + ".input_schema: must be a JSON Schema object with type object"
			}
		}
	}
	if tc := req.Get("tool_choice"); tc.Exists() {
		switch tc.Get("type").Str {
		case "auto", "any", "none":
		case "tool":
			if tc.Get("name").Str == "" {
				return "tool_choice.name: Field required"
			}
		default:
			return "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'"
		}
	}
	return ""
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
		switch typ := b.Get("type").Str; {
		case typ == "text":
			if t := b.Get("text"); t.Type != gjson.String || t.Str == "" {
				return bp + ".text: text content blocks must be non-empty"
			}
		case role == "system":
			return bp + ".type: system blocks must be text"
		case typ == "image" && role == "user":
			src := b.Get("source")
			switch src.Get("type").Str {
			case "base64":
				if src.Get("media_type").Str == "" || src.Get("data").Str == "" {
					return bp + ".source: base64 sources need media_type and data"
				}
			case "url":
				if src.Get("url").Str == "" {
					return bp + ".source.url: Field required"
				}
			default:
				return bp + ".source.type: Input should be 'base64' or 'url'"
			}
		case typ == "tool_use" && role == "assistant":
			if b.Get("id").Str == "" || b.Get("name").Str == "" || !b.Get("input").IsObject() {
				return bp + ": tool_use needs id, name and an object input"
			}
		case typ == "tool_result" && role == "user":
			if b.Get("tool_use_id").Str == "" {
				return bp + ".tool_use_id: Field required"
			}
		case typ == "thinking" || typ == "redacted_thinking":
		default:
			return bp + ".type: block type " + strconv.Quote(typ) + " is not allowed in a " + role + " message"
		}
	}
	return ""
}

// streamAnthropic sends the answer as Messages stream events, flushing
// after each.
func (s *Server) streamAnthropic(w http.ResponseWriter, r *http.Request, model, id string, a *answer) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	event := func(name string, data []byte) {
		b := make([]byte, 0, len(data)+32)
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, "\ndata: "...)
		b = append(b, data...)
		b = append(b, "\n\n"...)
		_, _ = w.Write(b)
		flush(w)
	}
	// ended runs the scripted behaviour due after the first content event
	// and reports whether the stream ends there.
	ended := func() bool {
		switch s.afterFirstWord(r, model) {
		case streamFails:
			event("error", []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
			return true
		case streamCut:
			return true
		}
		return false
	}
	start := []byte(`{"type":"message_start","message":{"id":"msg_` + id + `","type":"message","role":"assistant","model":`)
	start = appendString(start, model)
	start = append(start, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	start = strconv.AppendInt(start, int64(a.promptTokens), 10)
	start = append(start, `,"output_tokens":1}}}`...)
	event("message_start", start)
	event("ping", []byte(`{"type": "ping"}`))

	if a.tool != "" {
		blk := appendString([]byte(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_`+id+`","name":`), a.tool)
		event("content_block_start", append(blk, `,"input":{}}}`...))
		for i, f := range a.argFragments() {
			d := appendString([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`), f)
			event("content_block_delta", append(d, "}}"...))
			if i == 0 && ended() {
				return
			}
		}
	} else {
		event("content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`))
		for i := range a.words {
			d := appendString([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`), a.chunkWord(i))
			event("content_block_delta", append(d, "}}"...))
			if i == 0 && ended() {
				return
			}
		}
	}
	event("content_block_stop", []byte(`{"type":"content_block_stop","index":0}`))
	md := []byte(`{"type":"message_delta","delta":{"stop_reason":"` + anthropicStop(a) + `","stop_sequence":null},"usage":{"output_tokens":`)
	md = strconv.AppendInt(md, int64(a.completionTokens()), 10)
	event("message_delta", append(md, "}}"...))
	event("message_stop", []byte(`{"type":"message_stop"}`))
}

func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	b := append([]byte(`{"type":"error","error":{"type":`), appendString(nil, typ)...)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	b = append(b, `},"request_id":"req_fake"}`...)
	writeJSON(w, status, b)
}
