package cohere

import (
	"errors"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
	"github.com/modelgate/modelgate/providers/sse"
)

// ChatStream returns a translator for one streamed answer.
func (c Chat) ChatStream(opts providers.StreamOptions) providers.StreamTranslator {
	return &stream{chat: c, includeUsage: opts.IncludeUsage}
}

// toolCall links a Cohere tool call's stream index to its OpenAI index.
type toolCall struct {
	index gjson.Result // Cohere's index (may be absent)
	call  int          // OpenAI's tool_calls index: the count of earlier calls
}

// stream translates one Cohere event stream into unified chunks.
//
// Cohere frames its stream as server-sent events, each an "event: <type>"
// line and a "data: <json>" line whose object repeats the type: message-start,
// then for each content item (text or thinking) content-start, content-delta
// … content-end; tool-plan-delta before tool calls, and for each tool call
// tool-call-start, tool-call-delta … tool-call-end; citation-start and
// citation-end; message-end with the finish reason and usage; debug events
// at any time; and last "data: [DONE]".
type stream struct {
	chat         Chat
	includeUsage bool

	// chunks writes the unified events; it is started at message-start
	// (or the first event, if that is missing).
	chunks   providers.Chunks
	calls    []toolCall
	logprobs []byte // room for a chunk's logprobs
	usage    usage
	done     bool // message-end seen or an error emitted: nothing more follows
}

var errMalformed = errors.New("cohere: stream event data is not a JSON object")

// Event translates one upstream event.
func (s *stream) Event(dst, event []byte) ([]byte, error) {
	if s.done {
		return dst, nil
	}
	name, data := sse.Fields(event)
	if len(data) == 0 || string(data) == "[DONE]" {
		// A comment, an event without data, or the end marker after
		// message-end (before it, Close reports the cut).
		return dst, nil
	}
	if !providers.ValidJSON(data) {
		return dst, errMalformed
	}
	v := gjson.ParseBytes(data)
	if !v.IsObject() {
		return dst, errMalformed
	}
	// One pass over the event's members instead of a Get (a scan from the
	// start) for each.
	var typeField, id, index, delta, logprobs gjson.Result
	v.ForEach(func(key, val gjson.Result) bool {
		var field *gjson.Result
		switch key.Str {
		case "type":
			field = &typeField
		case "id":
			field = &id
		case "index":
			field = &index
		case "delta":
			field = &delta
		case "logprobs":
			field = &logprobs
		default:
			return true
		}
		if !field.Exists() {
			*field = val
		}
		return true
	})
	typ := typeField.Str
	if typ == "" {
		typ = string(name)
	}

	switch typ {
	case "message-start":
		if s.chunks.Started() {
			return dst, nil // a repeated message-start carries nothing new
		}
		s.start(id)
		return s.chunks.Role(dst, 0), nil

	case "content-start", "content-delta":
		content := delta.Get("message.content")
		if t := content.Get("thinking"); t.Type == gjson.String && t.Str != "" {
			s.ensureStarted()
			dst = s.chunks.Reasoning(dst, 0, jsonw.Lit(t.Raw))
		}
		return s.text(dst, content.Get("text"), logprobs), nil

	case "tool-plan-delta":
		return s.text(dst, delta.Get("message.tool_plan"), gjson.Result{}), nil

	case "tool-call-start":
		call := delta.Get("message.tool_calls")
		if call.IsArray() { // tolerate a one-element array
			call = call.Get("0")
		}
		k := len(s.calls)
		s.calls = append(s.calls, toolCall{index: index, call: k})
		fn := call.Get("function")
		s.ensureStarted()
		if id := call.Get("id"); id.Type == gjson.String && id.Str != "" {
			dst = s.chunks.ToolCallStart(dst, 0, k, jsonw.Lit(id.Raw), jsonw.StrOf(fn.Get("name")))
		} else {
			id := newCallID()
			dst = s.chunks.ToolCallStart(dst, 0, k, jsonw.Plain(providers.InPlace(id[:])), jsonw.StrOf(fn.Get("name")))
		}
		return s.arguments(dst, k, fn.Get("arguments")), nil

	case "tool-call-delta":
		if len(s.calls) == 0 {
			return dst, nil // a delta for a call that never started
		}
		call := s.calls[len(s.calls)-1].call
		if index.Exists() {
			for _, c := range s.calls {
				if c.index.Raw == index.Raw {
					call = c.call
					break
				}
			}
		}
		fn := delta.Get("message.tool_calls")
		if fn.IsArray() {
			fn = fn.Get("0")
		}
		return s.arguments(dst, call, fn.Get("function.arguments")), nil

	case "message-end":
		s.done = true
		reason := delta.Get("finish_reason").Str
		finish, ok := finishReason(reason)
		if e := delta.Get("error"); !ok || e.Type == gjson.String && e.Str != "" {
			if reason == "" {
				reason = "ERROR"
			}
			return s.chunks.Error(dst, generationError(reason, delta.Get("error").Str)), nil
		}
		s.usage.set(delta.Get("usage"))
		s.ensureStarted()
		dst = s.chunks.Finish(dst, 0, finish)
		return s.chunks.End(dst, s.usage.unified()), nil

	case "", "error":
		// Not one of Cohere's chat events but an error object, {"message":
		// "…"} as its error answers are: the stream failed.
		msg := v.Get("message")
		if msg.Type != gjson.String {
			msg = v.Get("error.message")
		}
		if msg.Type != gjson.String {
			msg = v.Get("error")
		}
		if msg.Type != gjson.String && typ == "" {
			return dst, nil
		}
		s.done = true
		e := providers.Error{Type: "server_error", Code: "provider_error", Message: msg.Str}
		if e.Message == "" {
			e.Message = "the provider reported an error in its stream"
		}
		return s.chunks.Error(dst, &e), nil
	}
	// content-end, tool-call-end, citation-start, citation-end, debug, and
	// event types this code does not know.
	return dst, nil
}

// Close appends an error event when the upstream stream ended before
// message-end (or an error) and nothing otherwise: [DONE] was sent with
// message-end.
// Ended implements providers.StreamEnder.
func (s *stream) Ended() bool { return s.done }

var _ providers.StreamEnder = (*stream)(nil)

// Usage implements providers.StreamTranslator: the usage the stream's end
// carried.
func (s *stream) Usage() providers.Used { return s.chunks.Used() }

func (s *stream) Close(dst []byte) []byte {
	if s.done {
		return dst
	}
	s.done = true
	return s.chunks.Incomplete(dst)
}

// start starts the chunks. Cohere's stream does not name the model.
func (s *stream) start(id gjson.Result) {
	s.chunks.Start(providers.Head{ID: jsonw.StrOf(id), Created: s.chat.now().Unix(), Model: jsonw.Plain("")}, s.includeUsage)
}

// ensureStarted starts the chunks, without an id, when the stream did not
// begin with message-start.
func (s *stream) ensureStarted() {
	if !s.chunks.Started() {
		s.start(gjson.Result{})
	}
}

// text appends a chunk whose delta sets content to v, unless v is empty
// and there are no logprobs to carry; logprob, when it is an object, is
// the Cohere logprob item of the text.
func (s *stream) text(dst []byte, v, logprob gjson.Result) []byte {
	if (v.Type != gjson.String || v.Str == "") && !logprob.IsObject() {
		return dst
	}
	s.ensureStarted()
	if !logprob.IsObject() {
		return s.chunks.Content(dst, 0, jsonw.StrOf(v))
	}
	w := jsonw.New(s.logprobs[:0])
	o := w.Object()
	content := o.Array("content")
	writeLogprob(content, logprob)
	content.End()
	o.Null("refusal")
	o.End()
	lp, err := w.Finish()
	if err != nil {
		lp = append(lp[:0], "null"...)
	}
	s.logprobs = lp
	return s.chunks.ContentLogprobs(dst, 0, jsonw.StrOf(v), providers.InPlace(lp))
}

// arguments appends a chunk with an arguments fragment for tool call k,
// unless the fragment is empty.
func (s *stream) arguments(dst []byte, k int, part gjson.Result) []byte {
	if part.Type != gjson.String || part.Str == "" {
		return dst
	}
	s.ensureStarted()
	return s.chunks.ToolCallArguments(dst, 0, k, jsonw.Lit(part.Raw))
}
