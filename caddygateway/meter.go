package caddygateway

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/sse"
)

// This file follows what each request used — its tokens, searches and the
// provider and model that answered — from the answer the client gets, in
// the client's own API: a chat completion's or chunk's usage, an
// embeddings list's, a rerank answer's meta, a Message's (message_start
// and message_delta), a Response's (response.completed). Streams are read
// event by event as they pass; nothing is held back for it.

// usageInfo is what one request used.
type usageInfo struct {
	Prompt       int64 // input tokens, cached and cache-write ones included
	Cached       int64 // of Prompt, read from a cache
	CacheWrite   int64 // of Prompt, written to a cache
	CacheWrite1h int64 // of CacheWrite, written to a cache lasting an hour
	Completion   int64 // output tokens, reasoning included
	Reasoning    int64 // of Completion
	Searches     int64 // rerank searches
	Embedding    int64 // embedding input tokens
	Known        bool  // the answer said what it used
}

// total is the tokens a tokens-per-minute limit counts.
func (u usageInfo) total() int64 { return u.Prompt + u.Completion + u.Embedding }

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

// usageParser reads usage from an answer, and from each event of a
// stream, in an API's shape.
type usageParser struct {
	answer func(body []byte, u *usageInfo)
	event  func(event []byte, u *usageInfo)
}

// lookup is gjson.GetBytes without its copy of the result (an answer's
// whole usage object, say): every caller here reads numbers, or compares
// a string, at once and keeps nothing of the result, so it may point into
// b.
func lookup(b []byte, path string) gjson.Result {
	return gjson.Get(providers.InPlace(b), path)
}

// chatUsage is read from chat completions and their chunks.
var chatUsage = usageParser{
	answer: func(b []byte, u *usageInfo) { readChatUsage(lookup(b, "usage"), u) },
	event: func(ev []byte, u *usageInfo) {
		if _, data := sse.Fields(ev); bytes.Contains(data, []byte(`"usage":{`)) {
			readChatUsage(lookup(data, "usage"), u)
		}
	},
}

// readChatUsage reads a chat usage object in one pass over it (it is read
// for every answer; five lookups by path each scanned it from the start),
// with providers.Fields: gjson's ForEach parsed each of its numbers into a
// float64 and cost a few thousand instructions per answer. A count the
// object lacks is 0; of a key given twice the first counts, as a lookup by
// path reads it.
func readChatUsage(v gjson.Result, u *usageInfo) {
	if !v.IsObject() {
		return
	}
	var prompt, completion, cached, cacheWrite, cacheWrite1h, reasoning usageCount
	var promptDetails, completionDetails bool
	for k, x := range providers.Fields(v.Raw) {
		switch k {
		case "prompt_tokens":
			prompt.set(x)
		case "completion_tokens":
			completion.set(x)
		case "prompt_tokens_details":
			if promptDetails {
				break
			}
			promptDetails = true
			for k, x := range providers.Fields(x) {
				switch k {
				case "cached_tokens":
					cached.set(x)
				case "cache_write_tokens":
					cacheWrite.set(x)
				case "cache_write_1h_tokens":
					cacheWrite1h.set(x)
				}
			}
		case "completion_tokens_details":
			if completionDetails {
				break
			}
			completionDetails = true
			for k, x := range providers.Fields(x) {
				if k == "reasoning_tokens" {
					reasoning.set(x)
					break
				}
			}
		}
	}
	u.Known = true
	u.Prompt, u.Completion, u.Cached, u.CacheWrite, u.Reasoning = prompt.n, completion.n, cached.n, cacheWrite.n, reasoning.n
	u.CacheWrite1h = cacheWrite1h.n
}

// usageCount is a count read from a usage object, once.
type usageCount struct {
	n    int64
	seen bool
}

// set reads the count from x, a raw JSON value, the first time: what
// gjson's Int gives (plain digits read at once).
func (c *usageCount) set(x string) {
	if c.seen {
		return
	}
	c.seen = true
	if n, ok := digits(x); ok {
		c.n = n
		return
	}
	c.n = gjson.Parse(x).Int()
}

// embeddingsUsage is read from an embeddings list, whose vectors take
// most of its bytes: providers.Members skips them many bytes at a time.
var embeddingsUsage = usageParser{answer: func(b []byte, u *usageInfo) {
	providers.Members(b, func(k, v []byte) bool {
		if string(k) != "usage" {
			return true
		}
		if t := gjson.GetBytes(v, "prompt_tokens"); t.Exists() {
			u.Known, u.Embedding = true, t.Int()
		}
		return false
	})
}}

// rerankUsage is read from a rerank answer's meta: the searches the
// provider billed, else one search (the unit rerank is priced in), and the
// tokens it reported.
var rerankUsage = usageParser{answer: func(b []byte, u *usageInfo) {
	u.Known = true
	bu := lookup(b, "meta.billed_units")
	u.Searches = max(bu.Get("search_units").Int(), 1)
	u.Prompt = bu.Get("input_tokens").Int()
}}

// messagesUsage is read from a Message and from message_start and
// message_delta events: input_tokens excludes the cache's tokens there.
var messagesUsage = usageParser{
	answer: func(b []byte, u *usageInfo) { readMessagesUsage(lookup(b, "usage"), u) },
	event: func(ev []byte, u *usageInfo) {
		name, data := sse.Fields(ev)
		switch string(name) {
		case "message_start":
			readMessagesUsage(lookup(data, "message.usage"), u)
		case "message_delta":
			readMessagesUsage(lookup(data, "usage"), u)
		}
	},
}

func readMessagesUsage(v gjson.Result, u *usageInfo) {
	if !v.IsObject() {
		return
	}
	u.Known = true
	var in, read, write, write1h, out usageCount
	var creation bool
	for k, x := range providers.Fields(v.Raw) {
		switch k {
		case "input_tokens":
			in.set(x)
		case "cache_read_input_tokens":
			read.set(x)
		case "cache_creation_input_tokens":
			write.set(x)
		case "cache_creation":
			// The writes by ttl; of a key given twice the first counts.
			if creation {
				break
			}
			creation = true
			for k, x := range providers.Fields(x) {
				if k == "ephemeral_1h_input_tokens" {
					write1h.set(x)
				}
			}
		case "output_tokens":
			out.set(x)
		}
	}
	// message_delta repeats or updates the counts message_start gave; a
	// field it leaves out keeps its value.
	if in.seen {
		if read.seen {
			u.Cached = read.n
		}
		if write.seen {
			u.CacheWrite = write.n
		}
		if creation {
			u.CacheWrite1h = write1h.n
		}
		u.Prompt = in.n + u.Cached + u.CacheWrite
	}
	if out.seen {
		u.Completion = out.n
	}
}

// responsesUsage is read from a Response and from its response.completed
// (or .incomplete or .failed) event.
var responsesUsage = usageParser{
	answer: func(b []byte, u *usageInfo) { readResponsesUsage(lookup(b, "usage"), u) },
	event: func(ev []byte, u *usageInfo) {
		if _, data := sse.Fields(ev); bytes.Contains(data, []byte(`"usage":{`)) {
			readResponsesUsage(lookup(data, "response.usage"), u)
		}
	},
}

func readResponsesUsage(v gjson.Result, u *usageInfo) {
	if !v.IsObject() {
		return
	}
	u.Known = true
	u.Prompt = v.Get("input_tokens").Int()
	u.Cached = v.Get("input_tokens_details.cached_tokens").Int()
	u.Completion = v.Get("output_tokens").Int()
	u.Reasoning = v.Get("output_tokens_details.reasoning_tokens").Int()
}

// tapStream is a stream on its way to the client: the translator's output
// (or, without a translator, the provider's events as they are), read for
// usage, and for chat — when the gateway asked for usage the client did
// not — without the usage chunk and the "usage":null fields.
type tapStream struct {
	inner providers.StreamTranslator // nil: events pass through
	m     *meter
	parse func(event []byte, u *usageInfo)
	strip bool
	// ends, for a stream passed through as the provider sends it, tells
	// an event after which the client has the whole answer: the API's last
	// event, an error event, or for chat a choice's finish_reason
	// (api.ends). ended is whether the client got one. A stream whose
	// provider closes it before then is ended with an error.
	ends  func(event []byte) bool
	ended bool
}

func (t *tapStream) Event(dst, ev []byte) ([]byte, error) {
	start := len(dst)
	if t.inner == nil {
		dst = append(append(dst, ev...), "\n\n"...)
	} else {
		var err error
		if dst, err = t.inner.Event(dst, ev); err != nil {
			return dst, err
		}
	}
	return t.read(dst, start), nil
}

// Ended implements providers.StreamEnder for the translator it reads.
func (t *tapStream) Ended() bool { return t.inner != nil && providers.StreamEnded(t.inner) }

var _ providers.StreamEnder = (*tapStream)(nil)

func (t *tapStream) Close(dst []byte) []byte {
	start := len(dst)
	if t.inner != nil {
		dst = t.inner.Close(dst)
	}
	return t.read(dst, start)
}

// passes reports whether p, one write of a stream passed through as the
// provider sends it, may go to the client as it is: whole events with "\n"
// line ends (what cutting them and writing each with its blank line would
// give byte for byte), none with a usage to read or a field to take out.
// Then it notes the first byte's time, as read does.
func (t *tapStream) passes(p []byte) bool {
	if t.inner != nil || t.strip || !bytes.HasSuffix(p, []byte("\n\n")) || bytes.IndexByte(p, '\r') >= 0 {
		return false
	}
	if t.parse != nil {
		if _, plain := nullUsages(p); !plain {
			return false
		}
	}
	if t.m.firstByte.IsZero() {
		t.m.firstByte = time.Now()
	}
	if t.ends != nil && !t.ended {
		t.noteEnd(p)
	}
	return true
}

// whole reports whether the client of a stream passed through has the
// whole answer; false when nobody looks (t nil, or no end to look for).
func (t *tapStream) whole() bool { return t != nil && t.ended }

// cutShort reports whether a stream passed through, whose API has an end
// to look for, ended before the client had the whole answer.
func (t *tapStream) cutShort() bool { return t != nil && t.ends != nil && !t.ended }

// noteEnd notes whether one of the events of seg, whole events each
// followed by a blank line, gives the client the whole answer. Once one
// has, what follows changes nothing (a keep-alive, or a provider's chunk
// after [DONE], which the SDKs do not read).
func (t *tapStream) noteEnd(seg []byte) {
	for len(seg) > 0 && !t.ended {
		ev := seg
		if i := bytes.Index(seg, []byte("\n\n")); i >= 0 {
			ev, seg = seg[:i], seg[i+2:]
		} else {
			seg = nil
		}
		// A stray line end (three in a row) starts the next event with
		// an empty line, which its fields ignore.
		if len(ev) > 0 && t.ends(ev) {
			t.ended = true
		}
	}
}

// read looks at the events out[start:] the client is about to get.
func (t *tapStream) read(out []byte, start int) []byte {
	out = t.readUsage(out, start)
	if t.ends != nil && !t.ended && len(out) > start {
		t.noteEnd(out[start:])
	}
	return out
}

// readUsage reads the usage in out[start:] and, when stripping, takes out
// what the client did not ask for.
func (t *tapStream) readUsage(out []byte, start int) []byte {
	seg := out[start:]
	if len(seg) == 0 {
		return out
	}
	if t.m.firstByte.IsZero() {
		t.m.firstByte = time.Now()
	}
	if t.parse == nil {
		return out
	}
	// Every chunk of a chat stream the gateway asked usage for carries
	// "usage":null, and usage is only ever in an object: a segment whose
	// every "usage" is such a field has nothing to read, and stripping it
	// is dropping those fields. One scan tells; only a segment with more
	// in it (the usage chunk, once a stream) is cut into events and read.
	if n, plain := nullUsages(seg); plain {
		if t.strip && n > 0 {
			return stripNullUsages(out, start, n)
		}
		return out
	}
	return t.readEvents(out, start)
}

// readEvents reads out[start:] event by event, each parsed, and when
// stripping rewrites it without the usage chunk and the nullUsage fields.
func (t *tapStream) readEvents(out []byte, start int) []byte {
	seg := out[start:]
	if !t.strip {
		for rest := seg; ; {
			ev, r, ok := sse.Cut(rest)
			if !ok {
				break
			}
			t.parse(ev, &t.m.usage)
			rest = r
		}
		return out
	}
	// Rewrite the segment without what the client did not ask for, in
	// place: what is kept of each event is never longer than the event
	// and its blank line, so w never passes the bytes still to be read.
	w := start
	for rest := seg; ; {
		ev, r, ok := sse.Cut(rest)
		if !ok {
			w += copy(out[w:], rest)
			break
		}
		rest = r
		t.parse(ev, &t.m.usage)
		if usageOnlyChunk(ev) {
			continue
		}
		if i := bytes.Index(ev, []byte(nullUsage)); i >= 0 {
			w += copy(out[w:], ev[:i])
			w += copy(out[w:], ev[i+len(nullUsage):])
		} else {
			w += copy(out[w:], ev)
		}
		w += copy(out[w:], "\n\n")
	}
	return out[:w]
}

// nullUsage is the field every chunk of a chat stream that includes usage
// carries, but the last.
const nullUsage = `,"usage":null`

// nullUsages counts the "usage" keys in seg and reports whether each is a
// nullUsage field, no two in one event (a blank line between them): then
// seg holds no usage to read, and stripping it is dropping those n fields,
// as the event-by-event rewrite would. A "usage" inside a JSON string
// cannot match: its quotes are escaped there.
func nullUsages(seg []byte) (n int, plain bool) {
	prev := 0
	for from := 0; ; n++ {
		i := indexUsageKey(seg[from:])
		if i < 0 {
			return n, true
		}
		at := from + i - 1 // where nullUsage would start
		if at < 0 || !bytes.HasPrefix(seg[at:], []byte(nullUsage)) ||
			(n > 0 && !bytes.Contains(seg[prev:at], []byte("\n\n"))) {
			return n, false
		}
		from = at + len(nullUsage)
		prev = from
	}
}

// stripNullUsages drops the n nullUsage fields from out[start:], moving
// what follows each back over it.
func stripNullUsages(out []byte, start, n int) []byte {
	w, r := start, start
	for range n {
		i := r + indexUsageKey(out[r:]) - 1 // every "usage" is a nullUsage
		w += copy(out[w:], out[r:i])
		r = i + len(nullUsage)
	}
	w += copy(out[w:], out[r:])
	return out[:w]
}

// indexUsageKey returns the index of the first "usage" (quotes included)
// in b, or -1. It looks for the key's 'g', rare in a chunk, where
// bytes.Index would stop at every quote, every few bytes of JSON.
func indexUsageKey(b []byte) int {
	const key, g = `"usage"`, 4 // the 'g' is key[g]
	for from := 0; ; {
		i := bytes.IndexByte(b[from:], 'g')
		if i < 0 {
			return -1
		}
		at := from + i - g
		if at >= 0 && at+len(key) <= len(b) && string(b[at:at+len(key)]) == key {
			return at
		}
		from += i + 1
	}
}

// usageOnlyChunk reports whether a chunk is the one that carries only the
// usage: no choices.
func usageOnlyChunk(ev []byte) bool {
	_, data := sse.Fields(ev)
	return bytes.Contains(data, []byte(`"usage":{`)) && len(lookup(data, "choices").Array()) == 0
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
