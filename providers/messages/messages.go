// Package messages serves Anthropic's Messages API (POST /v1/messages and
// /v1/messages/count_tokens, the model list of GET /v1/models) over
// modelgate's hub, the unified Chat Completions format, for every provider
// that is not Anthropic itself (Anthropic gets the request untouched).
//
// The translation runs both ways and works on bytes, as every translator in
// modelgate does: it reads JSON with gjson and writes it by appending.
//
//   - Validate and ValidateCountTokens check a client's body and return what
//     routing needs; their errors are 400s that ErrorBody renders in
//     Anthropic's error shape.
//   - ToChat rewrites a Messages request into a hub chat request, which the
//     provider's own chat translator then takes.
//   - FromChat rewrites a hub chat.completion into a Message.
//   - NewStream (or Wrap around a provider's stream translator) rewrites a
//     hub chunk stream into Anthropic's event stream, event by event.
//   - ErrorStatus, ErrorType, ErrorBody and AppendErrorEvent put any
//     providers.Error in Anthropic's shape, since every error a /v1/messages
//     client sees must be in it.
//   - CountTokens estimates input_tokens for count_tokens; ModelList writes
//     Anthropic's model list.
//   - Chat adapts a provider's providers.Chat so that it takes Messages
//     bodies and answers in Messages: a drop-in for the gateway's dispatcher.
package messages

import (
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// Info is what the gateway needs to know about a Messages request before
// it picks a provider.
type Info struct {
	Model  string
	Stream bool
}

// Validate checks a Messages request body (POST /v1/messages) as far as
// routing and Anthropic's own required shape go: a JSON object with a
// non-empty model, an integer max_tokens, a boolean stream and a non-empty
// messages array of {role, content}. It deliberately knows nothing of
// content block types, so that a request passed through to Anthropic is
// never refused for a block the gateway does not know; ToChat refuses
// what it cannot translate.
//
// Errors are *providers.Error with status 400 and type
// invalid_request_error; Param names the field Anthropic's way
// (messages.1.content).
func Validate(body []byte) (Info, error) {
	return validate(body, true)
}

// ValidateCountTokens checks a POST /v1/messages/count_tokens body: as
// Validate, without max_tokens and stream.
func ValidateCountTokens(body []byte) (Info, error) {
	return validate(body, false)
}

func validate(body []byte, create bool) (Info, error) {
	var info Info
	if !providers.ValidJSON(body) {
		return info, invalid("", "the request body is not valid JSON (or nests more than %d levels deep)", providers.MaxDepth)
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return info, invalid("", "the request body must be a JSON object")
	}
	var err error
	seen := map[string]bool{}
	var model, maxTokens, messages gjson.Result
	root.ForEach(func(key, v gjson.Result) bool {
		switch key.Str {
		case "model", "stream", "max_tokens", "messages":
			// The gateway routes and frames by these while the upstream
			// may read another duplicate: one each, so that all read the
			// same.
			if seen[key.Str] {
				err = invalid(key.Str, "%s must be given only once", key.Str)
				return false
			}
			seen[key.Str] = true
		}
		switch key.Str {
		case "model":
			model = v
		case "max_tokens":
			maxTokens = v
		case "messages":
			messages = v
		case "stream":
			if !create {
				return true
			}
			if v.Type != gjson.True && v.Type != gjson.False && v.Type != gjson.Null {
				err = invalid("stream", "stream must be a boolean")
				return false
			}
			info.Stream = v.Type == gjson.True
		}
		return true
	})
	if err != nil {
		return info, err
	}
	if model.Type != gjson.String || model.Str == "" {
		return info, invalid("model", "model is required and must be a non-empty string")
	}
	info.Model = model.Str
	if create {
		if !maxTokens.Exists() {
			return info, invalid("max_tokens", "Field required")
		}
		if !providers.IsInt(maxTokens) || maxTokens.Int() < 0 {
			return info, invalid("max_tokens", "max_tokens must be a non-negative integer")
		}
	}
	if err := checkMessages(messages); err != nil {
		return info, err
	}
	return info, nil
}

// checkMessages checks the messages array down to each message's role and
// content, not into content blocks beyond their being objects with a type.
func checkMessages(v gjson.Result) error {
	if !v.Exists() {
		return invalid("messages", "Field required")
	}
	if !v.IsArray() {
		return invalid("messages", "messages must be an array")
	}
	n := 0
	var err error
	v.ForEach(func(_, m gjson.Result) bool {
		p := "messages." + strconv.Itoa(n)
		n++
		if !m.IsObject() {
			err = invalid(p, "each message must be an object")
			return false
		}
		switch role := m.Get("role"); {
		case role.Type != gjson.String:
			err = invalid(p+".role", "Field required")
		case role.Str != "user" && role.Str != "assistant" && role.Str != "system":
			err = invalid(p+".role", "Input should be 'user' or 'assistant'")
		}
		if err != nil {
			return false
		}
		switch c := m.Get("content"); {
		case c.Type == gjson.String:
		case c.IsArray():
			j := 0
			c.ForEach(func(_, block gjson.Result) bool {
				if !block.IsObject() || block.Get("type").Type != gjson.String {
					err = invalid(p+".content."+strconv.Itoa(j), "each content block must be an object with a type")
					return false
				}
				j++
				return true
			})
		case !c.Exists():
			err = invalid(p+".content", "Field required")
		default:
			err = invalid(p+".content", "content must be a string or an array of content blocks")
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return invalid("messages", "messages: at least one message is required")
	}
	return nil
}

// invalid is a 400 invalid_request_error about param, whose message starts
// with the param as Anthropic's own messages do ("messages.0.content: …").
func invalid(param, format string, args ...any) *providers.Error {
	e := providers.InvalidParam(param, format, args...)
	if param != "" {
		e.Message = param + ": " + e.Message
	}
	return e
}

// unsupported is a 400 for something the hub, and so the provider, cannot
// express; Code is unsupported_parameter as providers.Unsupported's is.
func unsupported(param, format string, args ...any) *providers.Error {
	e := invalid(param, format, args...)
	e.Code = "unsupported_parameter"
	return e
}
