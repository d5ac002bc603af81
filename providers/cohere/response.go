package cohere

import (
	"errors"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// ChatResponse translates a Cohere chat answer (V2ChatResponse) into a
// unified chat.completion: the tool plan and text content items joined
// become content, thinking items reasoning_content, tool calls keep
// Cohere's ids, usage comes from tokens (billed_units where tokens are
// missing), and logprobs become logprobs.content. Citations have no
// OpenAI equivalent and are left out.
//
// An answer Cohere ended with finish_reason ERROR or TIMEOUT is incomplete:
// it comes back as a *providers.Error.
func (c Chat) ChatResponse(body []byte) ([]byte, error) {
	if !providers.ValidJSON(body) {
		return nil, errors.New("cohere: the answer is not valid JSON")
	}
	root := gjson.ParseBytes(body)
	msg := root.Get("message")
	if !root.IsObject() || !msg.IsObject() {
		return nil, errors.New("cohere: the answer has no message")
	}
	reason := root.Get("finish_reason").Str
	finish, ok := finishReason(reason)
	if !ok {
		return nil, generationError(reason, "")
	}

	b := make([]byte, 0, len(body)+256)
	b = append(b, `{"id":`...)
	b = providers.AppendRawString(b, root.Get("id"))
	b = append(b, `,"object":"chat.completion","created":`...)
	b = providers.AppendInt(b, c.now().Unix())
	// Cohere's answer does not name the model.
	b = append(b, `,"model":"","choices":[{"index":0,"message":{"role":"assistant","content":`...)

	content := msg.Get("content")
	b = appendText(b, msg.Get("tool_plan"), content)
	if r := joined(new(providers.TextJoin), content, "thinking"); r.Len() > 0 {
		b = append(b, `,"reasoning_content":`...)
		b = r.Append(b)
	}
	b = append(b, `,"refusal":null`...)
	b = appendToolCalls(b, msg.Get("tool_calls"))
	b = append(b, `},"logprobs":`...)
	b = appendLogprobs(b, root.Get("logprobs"))
	b = append(b, `,"finish_reason":"`...)
	b = append(b, finish...)
	b = append(b, `"}],"usage":`...)

	var u usage
	u.set(root.Get("usage"))
	b = u.unified().Append(b)
	return append(b, '}'), nil
}

// joined adds to t the non-empty strings of the items of content of the
// given type ("text" or "thinking"), under the key of the same name.
func joined(t *providers.TextJoin, content gjson.Result, typ string) *providers.TextJoin {
	content.ForEach(func(_, item gjson.Result) bool {
		if item.Get("type").Str != typ {
			return true
		}
		if v := item.Get(typ); v.Type == gjson.String && v.Str != "" {
			t.Add(v)
		}
		return true
	})
	return t
}

// appendText appends the message content: the tool plan, then the text
// items, joined; null when there is none of either.
func appendText(b []byte, plan, content gjson.Result) []byte {
	var t providers.TextJoin
	if plan.Type == gjson.String && plan.Str != "" {
		t.Add(plan)
	}
	return joined(&t, content, "text").Append(b)
}

// appendToolCalls appends ,"tool_calls":[…] for Cohere's tool calls, and
// nothing when there are none.
func appendToolCalls(b []byte, calls gjson.Result) []byte {
	n := 0
	calls.ForEach(func(_, call gjson.Result) bool {
		if n == 0 {
			b = append(b, `,"tool_calls":[`...)
		} else {
			b = append(b, ',')
		}
		n++
		fn := call.Get("function")
		b = append(b, `{"id":`...)
		if id := call.Get("id"); id.Type == gjson.String && id.Str != "" {
			b = append(b, id.Raw...)
		} else {
			b = appendCallID(b)
		}
		b = append(b, `,"type":"function","function":{"name":`...)
		b = providers.AppendRawString(b, fn.Get("name"))
		b = append(b, `,"arguments":`...)
		if a := fn.Get("arguments"); a.Type == gjson.String && a.Str != "" {
			b = append(b, a.Raw...)
		} else {
			b = append(b, `"{}"`...)
		}
		b = append(b, "}}"...)
		return true
	})
	if n > 0 {
		b = append(b, ']')
	}
	return b
}

// appendLogprobs appends the choice's logprobs: null, or
// {"content":[…],"refusal":null} for Cohere's logprob items.
func appendLogprobs(b []byte, items gjson.Result) []byte {
	if !items.IsArray() {
		return append(b, "null"...)
	}
	b = append(b, `{"content":[`...)
	n := 0
	items.ForEach(func(_, item gjson.Result) bool {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendLogprob(b, item)
		return true
	})
	return append(b, `],"refusal":null}`...)
}
