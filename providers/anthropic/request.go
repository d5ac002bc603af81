package anthropic

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// request holds the unified request fields the translation reads. The zero
// gjson.Result stands for an absent field.
type request struct {
	messages, maxTokens, maxCompletionTokens, stop, temperature, topP, stream gjson.Result
	tools, toolChoice, parallelToolCalls, user, safetyIdentifier              gjson.Result
}

// set records one top-level field of the unified request, or rejects it
// when Anthropic cannot express it. Fields not listed are dropped.
func (r *request) set(key string, v gjson.Result) error {
	switch key {
	case "messages":
		r.messages = v
	case "max_tokens":
		r.maxTokens = v
	case "max_completion_tokens":
		r.maxCompletionTokens = v
	case "stop":
		r.stop = v
	case "temperature":
		r.temperature = v
	case "top_p":
		r.topP = v
	case "stream":
		r.stream = v
	case "tools":
		r.tools = v
	case "tool_choice":
		r.toolChoice = v
	case "parallel_tool_calls":
		r.parallelToolCalls = v
	case "user":
		r.user = v
	case "safety_identifier":
		r.safetyIdentifier = v
	case "n":
		if v.Type == gjson.Number && v.Int() > 1 {
			return providers.Unsupported("n", providerName)
		}
	case "logprobs":
		if v.Type == gjson.True {
			return providers.Unsupported("logprobs", providerName)
		}
	case "response_format":
		if t := v.Get("type").Str; t == "json_object" || t == "json_schema" {
			return unsupported("response_format", "response_format "+t+" is not supported by provider type "+providerName)
		}
	case "audio", "functions", "function_call":
		if v.Exists() && v.Type != gjson.Null {
			return providers.Unsupported(key, providerName)
		}
	case "modalities":
		audio := false
		v.ForEach(func(_, m gjson.Result) bool {
			audio = m.Str == "audio"
			return !audio
		})
		if audio {
			return unsupported("modalities", "audio output is not supported by provider type "+providerName)
		}
	}
	return nil
}

// unsupported is providers.Unsupported with a more specific message.
func unsupported(param, msg string) *providers.Error {
	e := providers.Unsupported(param, providerName)
	e.Message = msg
	return e
}

// ChatRequest translates a unified chat request, already checked by
// providers.ValidateChat, into a Messages API request for model.
//
// System and developer messages become the top-level system; tool results
// become user turns; consecutive messages of the same resulting role merge
// into one turn. Features Anthropic lacks (n > 1, logprobs, JSON response
// formats, audio, file and audio parts, non-function tools) are rejected
// with a 400; parameters without an equivalent (seed, penalties,
// logit_bias, store, service_tier, …) are dropped.
func (c Chat) ChatRequest(body []byte, model string) (providers.Request, error) {
	version := c.Version
	if version == "" {
		version = DefaultVersion
	}
	req := providers.Request{
		Path:   "/v1/messages",
		Header: http.Header{"Anthropic-Version": {version}},
	}

	var r request
	var err error
	gjson.ParseBytes(body).ForEach(func(key, v gjson.Result) bool {
		err = r.set(key.Str, v)
		return err == nil
	})
	if err != nil {
		return req, err
	}

	b := make([]byte, 0, len(body)+256)
	b = append(b, `{"model":`...)
	b = providers.AppendString(b, model)

	b = append(b, `,"max_tokens":`...)
	switch {
	case r.maxCompletionTokens.Type == gjson.Number:
		b = providers.AppendInt(b, r.maxCompletionTokens.Int())
	case r.maxTokens.Type == gjson.Number:
		b = providers.AppendInt(b, r.maxTokens.Int())
	case c.MaxTokens > 0:
		b = providers.AppendInt(b, int64(c.MaxTokens))
	default:
		b = providers.AppendInt(b, DefaultMaxTokens)
	}

	var stack [16]message
	msgs := parseMessages(stack[:0], r.messages)
	if b, err = appendMessages(b, msgs); err != nil {
		return req, err
	}
	b = appendSystem(b, msgs)
	b = appendStop(b, r.stop)

	if t := r.temperature; t.Type == gjson.Number {
		b = append(b, `,"temperature":`...)
		if t.Num > 1 {
			b = append(b, '1') // Anthropic's range is 0–1, OpenAI's 0–2.
		} else {
			b = append(b, t.Raw...)
		}
	}
	if r.topP.Type == gjson.Number {
		b = append(b, `,"top_p":`...)
		b = append(b, r.topP.Raw...)
	}
	if r.stream.Type == gjson.True {
		b = append(b, `,"stream":true`...)
	}

	b, haveTools, err := appendTools(b, r.tools)
	if err != nil {
		return req, err
	}
	if b, err = appendToolChoice(b, r.toolChoice, r.parallelToolCalls.Type == gjson.False, haveTools); err != nil {
		return req, err
	}

	user := r.safetyIdentifier
	if user.Type != gjson.String || user.Str == "" {
		user = r.user
	}
	if user.Type == gjson.String && user.Str != "" {
		b = append(b, `,"metadata":{"user_id":`...)
		b = append(b, user.Raw...)
		b = append(b, '}')
	}

	req.Body = append(b, '}')
	return req, nil
}

// message holds the fields of one unified message that the translation
// reads.
type message struct {
	role                           string
	content, toolCalls, toolCallID gjson.Result
}

// parseMessages appends the messages of the array v to msgs. Like
// gjson's Get, which ValidateChat uses, it takes the first of duplicate keys.
func parseMessages(msgs []message, v gjson.Result) []message {
	v.ForEach(func(_, m gjson.Result) bool {
		var msg message
		var role gjson.Result
		m.ForEach(func(key, v gjson.Result) bool {
			var field *gjson.Result
			switch key.Str {
			case "role":
				field = &role
			case "content":
				field = &msg.content
			case "tool_calls":
				field = &msg.toolCalls
			case "tool_call_id":
				field = &msg.toolCallID
			default:
				return true
			}
			if !field.Exists() {
				*field = v
			}
			return true
		})
		msg.role = role.Str
		msgs = append(msgs, msg)
		return true
	})
	return msgs
}

// Message kinds: the role a unified message takes in Anthropic's request.
const (
	kindSystem = iota
	kindUser
	kindAssistant
)

// kindOf maps a unified role, which ValidateChat has checked, to its kind.
func kindOf(role string) int {
	switch role {
	case "system", "developer":
		return kindSystem
	case "assistant":
		return kindAssistant
	default: // user, tool
		return kindUser
	}
}

// appendMessages appends "messages": every non-system message, with runs of
// messages that take the same Anthropic role merged into one turn.
func appendMessages(b []byte, msgs []message) ([]byte, error) {
	b = append(b, `,"messages":[`...)
	turns := 0
	for i := 0; i < len(msgs); {
		kind := kindOf(msgs[i].role)
		if kind == kindSystem {
			i++
			continue
		}
		// The turn runs until the next message of the other role; system
		// messages in between are hoisted and do not break it.
		end, n := i+1, 1
		for ; end < len(msgs); end++ {
			k := kindOf(msgs[end].role)
			if k == kindSystem {
				continue
			}
			if k != kind {
				break
			}
			n++
		}

		if turns > 0 {
			b = append(b, ',')
		}
		turns++
		if kind == kindUser {
			b = append(b, `{"role":"user","content":`...)
		} else {
			b = append(b, `{"role":"assistant","content":`...)
		}

		if n == 1 {
			if s, ok := plainContent(&msgs[i]); ok {
				b = append(b, s.Raw...)
				b = append(b, '}')
				i = end
				continue
			}
		}

		open := len(b)
		b = append(b, '[')
		blocks := 0
		for j := i; j < end; j++ {
			var err error
			switch m := &msgs[j]; m.role {
			case "assistant":
				b, err = appendAssistantBlocks(b, m, j, &blocks)
			case "tool":
				b = appendToolResult(b, m, &blocks)
			case "user":
				b, err = appendUserBlocks(b, m, j, &blocks)
			}
			if err != nil {
				return b, err
			}
		}
		if blocks == 0 {
			// Only empty text: Anthropic accepts an empty string (as a
			// final assistant prefill), never an empty text block.
			b = append(b[:open], `""`...)
		} else {
			b = append(b, ']')
		}
		b = append(b, '}')
		i = end
	}
	return append(b, ']'), nil
}

// plainContent reports whether a message that forms a turn on its own can
// keep a plain string as content, and returns that string.
func plainContent(m *message) (gjson.Result, bool) {
	content := m.content
	if content.Type != gjson.String {
		return content, false
	}
	switch m.role {
	case "user":
		return content, true
	case "tool":
		return content, false
	default: // assistant: only without tool calls
		calls := false
		m.toolCalls.ForEach(func(_, _ gjson.Result) bool {
			calls = true
			return false
		})
		return content, !calls
	}
}

// sep appends the comma before a block after the first and counts blocks.
func sep(b []byte, n *int) []byte {
	if *n > 0 {
		b = append(b, ',')
	}
	*n++
	return b
}

// appendTextBlock appends {"type":"text","text":…} for a JSON string v,
// unless it is empty: Anthropic rejects empty text blocks.
func appendTextBlock(b []byte, v gjson.Result, n *int) []byte {
	if v.Str == "" {
		return b
	}
	b = sep(b, n)
	b = append(b, `{"type":"text","text":`...)
	b = append(b, v.Raw...)
	return append(b, '}')
}

// partText is the text of a text or refusal content part.
func partText(part gjson.Result) gjson.Result {
	if part.Get("type").Str == "refusal" {
		return part.Get("refusal")
	}
	return part.Get("text")
}

// appendTextParts appends text blocks for content that is a string or an
// array of text (or refusal) parts.
func appendTextParts(b []byte, content gjson.Result, n *int) []byte {
	if content.Type == gjson.String {
		return appendTextBlock(b, content, n)
	}
	content.ForEach(func(_, part gjson.Result) bool {
		b = appendTextBlock(b, partText(part), n)
		return true
	})
	return b
}

// appendUserBlocks appends the blocks of user message i.
func appendUserBlocks(b []byte, m *message, i int, n *int) ([]byte, error) {
	content := m.content
	if content.Type == gjson.String {
		return appendTextBlock(b, content, n), nil
	}
	var err error
	j := 0
	content.ForEach(func(_, part gjson.Result) bool {
		switch typ := part.Get("type").Str; typ {
		case "image_url":
			b, err = appendImage(b, part.Get("image_url.url"), i, j, n)
		case "input_audio", "file":
			err = unsupported(partParam(i, j)+".type",
				typ+" content parts are not supported by provider type "+providerName)
		default: // text, refusal
			b = appendTextBlock(b, partText(part), n)
		}
		j++
		return err == nil
	})
	return b, err
}

func partParam(i, j int) string {
	return "messages[" + strconv.Itoa(i) + "].content[" + strconv.Itoa(j) + "]"
}

// appendImage appends an image block for an image_url part: a base64 source
// for a data URL, a url source otherwise.
func appendImage(b []byte, url gjson.Result, i, j int, n *int) ([]byte, error) {
	u := url.Str
	if len(u) < 5 || !strings.EqualFold(u[:5], "data:") {
		b = sep(b, n)
		b = append(b, `{"type":"image","source":{"type":"url","url":`...)
		b = append(b, url.Raw...)
		return append(b, "}}"...), nil
	}
	meta, data, ok := strings.Cut(u[5:], ",")
	media, _, _ := strings.Cut(meta, ";")
	if !ok || media == "" || !strings.HasSuffix(meta, ";base64") {
		return b, providers.InvalidParam(partParam(i, j)+".image_url.url",
			"an image data URL must look like data:<media type>;base64,<data>")
	}
	b = sep(b, n)
	b = append(b, `{"type":"image","source":{"type":"base64","media_type":`...)
	b = providers.AppendString(b, media)
	b = append(b, `,"data":`...)
	b = providers.AppendString(b, data)
	return append(b, "}}"...), nil
}

// appendAssistantBlocks appends the blocks of assistant message i: its text,
// then a tool_use block per tool call.
func appendAssistantBlocks(b []byte, m *message, i int, n *int) ([]byte, error) {
	b = appendTextParts(b, m.content, n)
	var err error
	j := 0
	m.toolCalls.ForEach(func(_, call gjson.Result) bool {
		fn := call.Get("function")
		input := strings.TrimSpace(fn.Get("arguments").Str)
		if input == "" {
			input = "{}"
		} else if input[0] != '{' || !gjson.Valid(input) {
			err = providers.InvalidParam(
				"messages["+strconv.Itoa(i)+"].tool_calls["+strconv.Itoa(j)+"].function.arguments",
				"function.arguments must be a JSON object encoded as a string")
			return false
		}
		b = sep(b, n)
		b = append(b, `{"type":"tool_use","id":`...)
		b = appendRawString(b, call.Get("id"))
		b = append(b, `,"name":`...)
		b = appendRawString(b, fn.Get("name"))
		b = append(b, `,"input":`...)
		b = append(b, input...)
		b = append(b, '}')
		j++
		return true
	})
	return b, err
}

// appendToolResult appends the tool_result block for a tool message.
func appendToolResult(b []byte, m *message, n *int) []byte {
	b = sep(b, n)
	b = append(b, `{"type":"tool_result","tool_use_id":`...)
	b = appendRawString(b, m.toolCallID)
	switch content := m.content; {
	case content.Type == gjson.String:
		b = append(b, `,"content":`...)
		b = append(b, content.Raw...)
	case content.IsArray():
		at := len(b)
		b = append(b, `,"content":[`...)
		parts := 0
		b = appendTextParts(b, content, &parts)
		if parts == 0 {
			b = b[:at] // content is optional
		} else {
			b = append(b, ']')
		}
	}
	return append(b, '}')
}

// appendSystem appends the top-level "system" made of all system and
// developer messages: a plain string when there is exactly one and its
// content is a string, else an array of text blocks in order.
func appendSystem(b []byte, msgs []message) []byte {
	count := 0
	var sole gjson.Result
	for i := range msgs {
		if kindOf(msgs[i].role) == kindSystem {
			count++
			sole = msgs[i].content
		}
	}
	if count == 0 {
		return b
	}
	if count == 1 && sole.Type == gjson.String {
		b = append(b, `,"system":`...)
		return append(b, sole.Raw...)
	}
	at := len(b)
	b = append(b, `,"system":[`...)
	blocks := 0
	for i := range msgs {
		if kindOf(msgs[i].role) == kindSystem {
			b = appendTextParts(b, msgs[i].content, &blocks)
		}
	}
	if blocks == 0 {
		return b[:at]
	}
	return append(b, ']')
}

// appendStop appends stop_sequences for a stop string or array; empty
// sequences are left out.
func appendStop(b []byte, stop gjson.Result) []byte {
	if stop.Type != gjson.String && !stop.IsArray() {
		return b
	}
	at := len(b)
	b = append(b, `,"stop_sequences":[`...)
	n := 0
	add := func(s gjson.Result) {
		if s.Type == gjson.String && s.Str != "" {
			b = sep(b, &n)
			b = append(b, s.Raw...)
		}
	}
	if stop.Type == gjson.String {
		add(stop)
	} else {
		stop.ForEach(func(_, s gjson.Result) bool {
			add(s)
			return true
		})
	}
	if n == 0 {
		return b[:at]
	}
	return append(b, ']')
}

// appendTools appends "tools" for function tools and reports whether there
// were any. Other tool types are rejected.
func appendTools(b []byte, tools gjson.Result) ([]byte, bool, error) {
	if !tools.IsArray() {
		return b, false, nil
	}
	at := len(b)
	b = append(b, `,"tools":[`...)
	n := 0
	var err error
	tools.ForEach(func(_, t gjson.Result) bool {
		if typ := t.Get("type").Str; typ != "function" {
			err = unsupported("tools["+strconv.Itoa(n)+"].type",
				typ+" tools are not supported by provider type "+providerName)
			return false
		}
		fn := t.Get("function")
		b = sep(b, &n)
		b = append(b, `{"name":`...)
		b = appendRawString(b, fn.Get("name"))
		if d := fn.Get("description"); d.Type == gjson.String && d.Str != "" {
			b = append(b, `,"description":`...)
			b = append(b, d.Raw...)
		}
		b = append(b, `,"input_schema":`...)
		b = appendSchema(b, fn.Get("parameters"))
		b = append(b, '}')
		return true
	})
	if err != nil {
		return b, false, err
	}
	if n == 0 {
		return b[:at], false, nil
	}
	return append(b, ']'), true, nil
}

// appendSchema appends a tool's input_schema. Anthropic requires an object
// schema with "type"; OpenAI allows parameters to be left out or to be {}
// for a function without arguments.
func appendSchema(b []byte, params gjson.Result) []byte {
	if !params.IsObject() {
		return append(b, `{"type":"object"}`...)
	}
	if params.Get("type").Exists() {
		return append(b, params.Raw...)
	}
	b = append(b, `{"type":"object"`...)
	if inner := strings.TrimSpace(params.Raw[1 : len(params.Raw)-1]); inner != "" {
		b = append(b, ',')
		b = append(b, inner...)
	}
	return append(b, '}')
}

// appendToolChoice appends tool_choice. disableParallel mirrors
// parallel_tool_calls: false; haveTools says whether tools were sent, since
// Anthropic accepts tool_choice only with tools.
func appendToolChoice(b []byte, tc gjson.Result, disableParallel, haveTools bool) ([]byte, error) {
	var choice, name string
	switch {
	case tc.Type == gjson.String:
		choice = tc.Str
	case tc.IsObject():
		if tc.Get("type").Str != "function" {
			return b, unsupported("tool_choice",
				"tool_choice of type "+strconv.Quote(tc.Get("type").Str)+" is not supported by provider type "+providerName)
		}
		choice, name = "function", tc.Get("function.name").Raw
	}
	if !haveTools {
		if choice == "required" || choice == "function" {
			return b, providers.InvalidParam("tool_choice", "tool_choice %q needs tools", choice)
		}
		return b, nil // "none", "auto" or nothing: no tools is the same thing.
	}

	switch choice {
	case "none":
		return append(b, `,"tool_choice":{"type":"none"}`...), nil
	case "required":
		b = append(b, `,"tool_choice":{"type":"any"`...)
	case "function":
		b = append(b, `,"tool_choice":{"type":"tool","name":`...)
		b = append(b, name...)
	case "auto":
		b = append(b, `,"tool_choice":{"type":"auto"`...)
	default: // none given
		if !disableParallel {
			return b, nil
		}
		b = append(b, `,"tool_choice":{"type":"auto"`...)
	}
	if disableParallel {
		b = append(b, `,"disable_parallel_tool_use":true`...)
	}
	return append(b, '}'), nil
}
