package messages

import (
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/relay"
	"github.com/modelgate/modelgate/providers/sse"
)

// NewRelay returns the translator of a Messages stream that passes
// through to a provider that speaks the API (Anthropic): the events reach
// the client as the provider sent them, read for the usage message_start
// and message_delta carry and for the end of the answer (message_stop, or
// an error event).
func NewRelay() providers.Relay {
	return &relay.Stream{Read: readEventUsage, Ends: streamEnds, Incomplete: AppendErrorEvent}
}

// AnswerUsage reads the usage of a Message, as the provider sent it.
func AnswerUsage(message []byte) providers.Used {
	var u providers.Used
	ReadUsage(gjson.Get(providers.InPlace(message), "usage"), &u)
	return u
}

// readEventUsage reads the usage of message_start and message_delta.
func readEventUsage(ev []byte, u *providers.Used) {
	name, data := sse.Fields(ev)
	switch string(name) {
	case "message_start":
		ReadUsage(gjson.Get(providers.InPlace(data), "message.usage"), u)
	case "message_delta":
		ReadUsage(gjson.Get(providers.InPlace(data), "usage"), u)
	}
}

// streamEnds reports whether an event ends a Messages stream.
func streamEnds(ev []byte) bool {
	name, _ := sse.Fields(ev)
	return string(name) == "message_stop" || string(name) == "error"
}

// ReadUsage reads a Messages usage object into u, over what an earlier
// event of the stream gave: input_tokens excludes the cache's tokens,
// which the prompt includes; cache_creation tells the cache writes apart
// by ttl, of which the one-hour ones are CacheWrite1h. message_delta
// repeats or updates the counts message_start gave; a field it leaves out
// keeps its value.
func ReadUsage(v gjson.Result, u *providers.Used) {
	if !v.IsObject() {
		return
	}
	u.Known = true
	var in, read, write, write1h, out providers.Count
	var creation bool
	for k, x := range providers.Fields(v.Raw) {
		switch k {
		case "input_tokens":
			in.Set(x)
		case "cache_read_input_tokens":
			read.Set(x)
		case "cache_creation_input_tokens":
			write.Set(x)
		case "cache_creation":
			// The writes by ttl; of a key given twice the first counts.
			if creation {
				break
			}
			creation = true
			for k, x := range providers.Fields(x) {
				if k == "ephemeral_1h_input_tokens" {
					write1h.Set(x)
				}
			}
		case "output_tokens":
			out.Set(x)
		}
	}
	if in.Seen {
		if read.Seen {
			u.Cached = read.N
		}
		if write.Seen {
			u.CacheWrite = write.N
		}
		if creation {
			u.CacheWrite1h = write1h.N
		}
		u.Prompt = in.N + u.Cached + u.CacheWrite
	}
	if out.Seen {
		u.Completion = out.N
	}
}
