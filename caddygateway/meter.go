package caddygateway

import (
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers"
)

// This file follows what each request used — its tokens, searches and the
// provider and model that answered — as the translators report it with
// each answer (providers.Used), streams included; nothing is read back out
// of the bytes bound for the client.

// usageInfo is what one request used.
type usageInfo = providers.Used

// meter follows one request through the dispatcher.
type meter struct {
	start     time.Time
	firstByte time.Time // the first event of a stream reached the client
	stream    bool
	provider  *provider // the provider that answered
	model     string    // that provider's name of the model
	tried     []target  // every target tried, in order: a prefix of the call's targets
	usage     usageInfo

	// Set when the request is settled, for its access log entry and its
	// placeholders.
	settled bool
	key     *Key // nil: no key called (a batch line)
	cost    pricing.Money
	priced  bool
}

// lookup is gjson.GetBytes without its copy of the result: every caller
// here reads a value at once and keeps nothing of the result, so it may
// point into b.
func lookup(b []byte, path string) gjson.Result {
	return gjson.Get(providers.InPlace(b), path)
}

// placeholder is the request's replacer's source of the placeholders the
// dispatcher sets (dispatcher.serve maps it): {http.modelgate.provider} and
// {http.modelgate.model}, the target being tried (after a fallback, the
// last one tried), and once the request is settled what it used:
// {http.modelgate.tokens_in}, {http.modelgate.tokens_out},
// {http.modelgate.tokens_cached}, {http.modelgate.cost} (dollars, or
// "unpriced"), {http.modelgate.fallback} (the targets tried, joined by
// " > ") and, for a stream, {http.modelgate.ttft_ms}. Each is formatted when
// something reads it — an access log's log_append, a header, a later
// handler — rather than stored for every request whether read or not.
func (m *meter) placeholder(key string) (any, bool) {
	name, ok := strings.CutPrefix(key, "http.modelgate.")
	if !ok {
		return nil, false
	}
	if name == "provider" || name == "model" {
		if len(m.tried) == 0 {
			return nil, false
		}
		t := m.tried[len(m.tried)-1]
		if name == "provider" {
			return t.provider.name, true
		}
		return t.model, true
	}
	if !m.settled {
		return nil, false
	}
	switch name {
	case "tokens_in":
		return strconv.FormatInt(m.usage.Prompt+m.usage.Embedding, 10), true
	case "tokens_out":
		return strconv.FormatInt(m.usage.Completion, 10), true
	case "tokens_cached":
		return strconv.FormatInt(m.usage.Cached, 10), true
	case "cost":
		return m.costText(), true
	case "fallback":
		var b strings.Builder
		for i, t := range m.tried {
			if i > 0 {
				b.WriteString(" > ")
			}
			b.WriteString(t.String())
		}
		return b.String(), true
	case "ttft_ms":
		if !m.firstByte.IsZero() {
			return strconv.FormatInt(m.firstByte.Sub(m.start).Milliseconds(), 10), true
		}
	}
	return nil, false
}

// costText is what a settled request cost, in dollars, or "unpriced".
func (m *meter) costText() string {
	if !m.priced {
		return "unpriced"
	}
	return m.cost.String()
}
