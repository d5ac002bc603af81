package openai

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/relay"
	"github.com/modelgate/modelgate/providers/sse"
)

// NewRelay returns the translator of a stream of unified chunks that
// passes through (an OpenAI-compatible provider's, whose ChatStream is
// nil): the chunks reach the client as the provider sent them, read for
// the usage the gateway asked for and for the end of the answer. When the
// client did not ask for usage (includeUsage false), the usage chunk and
// the "usage":null of every other chunk are taken out.
func NewRelay(includeUsage bool) providers.Relay {
	return &relay.Stream{Read: readEventUsage, Strip: !includeUsage, StripChunk: usageOnlyChunk,
		Ends: streamEnds, Incomplete: appendErrorEvent}
}

// readEventUsage reads the usage of a chunk that carries one.
func readEventUsage(ev []byte, u *providers.Used) {
	if _, data := sse.Fields(ev); bytes.Contains(data, []byte(`"usage":{`)) {
		*u = providers.ReadUsage(gjson.Get(providers.InPlace(data), "usage"))
	}
}

// usageOnlyChunk reports whether a chunk is the one that carries only the
// usage: no choices.
func usageOnlyChunk(ev []byte) bool {
	_, data := sse.Fields(ev)
	return bytes.Contains(data, []byte(`"usage":{`)) && len(gjson.Get(providers.InPlace(data), "choices").Array()) == 0
}

// appendErrorEvent appends the event data: {"error":{…}} that ends a chat
// stream.
func appendErrorEvent(dst []byte, e *providers.Error) []byte { return sse.AppendData(dst, e.JSON()) }

// streamEnds reports whether a chat stream's event ends it: data:
// [DONE], an error, or a chunk with a choice's finish_reason — some
// OpenAI-compatible servers never send [DONE], and their answer is whole
// once the finish_reason came. It looks at every event of every stream
// passed through, so a chunk on one data line is read without parsing
// its fields.
func streamEnds(ev []byte) bool {
	if bytes.HasPrefix(ev, []byte("data: {")) && ev[len(ev)-1] == '}' {
		data := ev[len("data: "):]
		return bytes.HasPrefix(data, []byte(`{"error"`)) || finishes(data)
	}
	name, data := sse.Fields(ev)
	data = bytes.TrimSpace(data)
	return string(name) == "error" || string(data) == "[DONE]" || bytes.HasPrefix(data, []byte(`{"error"`)) || finishes(data)
}

// finishes reports whether a chat chunk has a finish_reason that is not
// null. It looks for `_reason":`, whose first byte is rare in a chunk (a
// search for `"finish_reason":` stops at every quote), then checks what
// comes before.
func finishes(chunk []byte) bool {
	const field, head = `_reason":`, `"finish`
	for from := 0; ; {
		i := bytes.Index(chunk[from:], []byte(field))
		if i < 0 {
			return false
		}
		i += from
		from = i + len(field)
		if i < len(head) || string(chunk[i-len(head):i]) != head {
			continue
		}
		if v := bytes.TrimLeft(chunk[from:], " "); len(v) > 0 && v[0] == '"' {
			return true
		}
	}
}
