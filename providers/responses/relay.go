package responses

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/relay"
	"github.com/modelgate/modelgate/providers/jsonw"
	"github.com/modelgate/modelgate/providers/sse"
)

// NewRelay returns the translator of a Responses stream that passes
// through to a provider that speaks the API (OpenAI, Azure OpenAI): the
// events reach the client as the provider sent them, read for the usage
// the terminal event's Response carries and for the end of the answer
// (response.completed, .incomplete, .failed, or an error event). onID,
// when not nil, is told the response's id, from the first event that
// gives it (the gateway keeps a pointer to a response its provider
// stores).
func NewRelay(onID func(id string)) providers.Relay {
	return &idRelay{Stream: relay.Stream{Read: readEventUsage, Ends: streamEnds, Incomplete: AppendErrorEvent}, onID: onID}
}

// idRelay is a relay that looks for the response's id in its first events.
type idRelay struct {
	relay.Stream
	onID func(id string) // nil once told
}

// Event tells onID the response's id, if the event gives it first, and
// passes the event on.
func (r *idRelay) Event(dst, ev []byte) ([]byte, error) {
	if r.onID != nil {
		if _, data := sse.Fields(ev); len(data) > 0 {
			if id := gjson.GetBytes(data, "response.id").Str; id != "" {
				onID := r.onID
				r.onID = nil
				onID(id)
			}
		}
	}
	return r.Stream.Event(dst, ev)
}

// Passes lets whole events through as they are once the id is known:
// before, each event is looked at.
func (r *idRelay) Passes(seg []byte) bool { return r.onID == nil && r.Stream.Passes(seg) }

// AnswerUsage reads the usage of a Response, as the provider sent it.
func AnswerUsage(response []byte) providers.Used {
	var u providers.Used
	readUsage(gjson.Get(providers.InPlace(response), "usage"), &u)
	return u
}

// readEventUsage reads the usage of an event whose Response carries one
// (response.completed, .incomplete or .failed).
func readEventUsage(ev []byte, u *providers.Used) {
	if _, data := sse.Fields(ev); bytes.Contains(data, []byte(`"usage":{`)) {
		readUsage(gjson.Get(providers.InPlace(data), "response.usage"), u)
	}
}

// readUsage reads a Responses usage object into u.
func readUsage(v gjson.Result, u *providers.Used) {
	if !v.IsObject() {
		return
	}
	u.Known = true
	u.Prompt = v.Get("input_tokens").Int()
	u.Cached = v.Get("input_tokens_details.cached_tokens").Int()
	u.Completion = v.Get("output_tokens").Int()
	u.Reasoning = v.Get("output_tokens_details.reasoning_tokens").Int()
}

// streamEnds reports whether an event ends a Responses stream: the
// response's last state, or an error. Each event's type is its name, and
// in its data.
func streamEnds(ev []byte) bool {
	name, data := sse.Fields(ev)
	typ := string(name)
	if typ == "" {
		typ = gjson.GetBytes(data, "type").Str
	}
	switch typ {
	case "response.completed", "response.incomplete", "response.failed", "error":
		return true
	}
	return false
}

// AppendErrorEvent appends the Responses API's error event for e, which
// ends a stream the gateway cannot finish:
//
//	event: error
//	data: {"type":"error","code":…,"message":…,"param":null,"sequence_number":0}
func AppendErrorEvent(dst []byte, e *providers.Error) []byte {
	w := jsonw.New(append(dst, "event: error\ndata: "...))
	o := w.Object()
	o.Str("type", "error")
	o.Str("code", e.Code)
	o.Str("message", e.Message)
	o.Null("param")
	o.Int("sequence_number", 0)
	o.End()
	b, _ := w.Finish() // straight-line writing: no misuse
	return append(b, "\n\n"...)
}
