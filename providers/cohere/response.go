package cohere

import (
	"errors"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
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
func (c Chat) ChatResponse(body []byte) ([]byte, providers.Used, error) {
	if !providers.ValidJSON(body) {
		return nil, providers.Used{}, errors.New("cohere: the answer is not valid JSON")
	}
	root := gjson.ParseBytes(body)
	msg := root.Get("message")
	if !root.IsObject() || !msg.IsObject() {
		return nil, providers.Used{}, errors.New("cohere: the answer has no message")
	}
	reason := root.Get("finish_reason").Str
	finish, ok := finishReason(reason)
	if !ok {
		return nil, providers.Used{}, generationError(reason, "")
	}

	w := jsonw.New(make([]byte, 0, len(body)+256))
	// Cohere's answer does not name the model.
	comp := providers.StartCompletion(&w, providers.Head{ID: jsonw.StrOf(root.Get("id")), Created: c.now().Unix(), Model: jsonw.Plain("")})
	m := comp.Choice(0)
	content := msg.Get("content")
	var text providers.TextJoin
	if plan := msg.Get("tool_plan"); plan.Type == gjson.String && plan.Str != "" {
		text.Add(plan)
	}
	m.JoinedContent(joined(&text, content, "text"))
	if r := joined(new(providers.TextJoin), content, "thinking"); r.Len() > 0 {
		m.JoinedReasoning(r)
	}
	m.NullRefusal()
	writeToolCalls(m, msg.Get("tool_calls"))
	if lp := root.Get("logprobs"); lp.IsArray() {
		writeLogprobs(m.Logprobs(), lp)
		m.Finish(finish)
	} else {
		m.End(finish)
	}

	var u usage
	u.set(root.Get("usage"))
	used := u.unified()
	comp.Usage(used)
	out, err := comp.Finish()
	return out, used.Used(), err
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

// writeToolCalls writes tool_calls for Cohere's tool calls, and nothing
// when there are none.
func writeToolCalls(m providers.Message, calls gjson.Result) {
	n := 0
	var list providers.ToolCalls
	calls.ForEach(func(_, call gjson.Result) bool {
		if n++; n == 1 {
			list = m.ToolCalls()
		}
		fn := call.Get("function")
		args := jsonw.Plain("{}")
		if a := fn.Get("arguments"); a.Type == gjson.String && a.Str != "" {
			args = jsonw.Lit(a.Raw)
		}
		if id := call.Get("id"); id.Type == gjson.String && id.Str != "" {
			list.Call(jsonw.Lit(id.Raw), jsonw.StrOf(fn.Get("name")), args)
		} else {
			id := newCallID()
			list.Call(jsonw.Plain(providers.InPlace(id[:])), jsonw.StrOf(fn.Get("name")), args)
		}
		return true
	})
	if n > 0 {
		list.End()
	}
}
