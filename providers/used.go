package providers

import (
	"github.com/tidwall/gjson"
)

// Used is what one answer used, as data: the counts the gateway meters,
// prices and records. Translators return it with the answers they
// translate (Chat.ChatResponse, StreamTranslator.Usage), so that nothing
// reads it back out of the bytes bound for the client.
type Used struct {
	Prompt       int64 // input tokens, cached and cache-write ones included
	Cached       int64 // of Prompt, read from a cache
	CacheWrite   int64 // of Prompt, written to a cache
	CacheWrite1h int64 // of CacheWrite, written to a cache lasting an hour
	Completion   int64 // output tokens, reasoning included
	Reasoning    int64 // of Completion
	Searches     int64 // rerank searches
	Embedding    int64 // embedding input tokens

	// Known reports that the answer said what it used. An answer that did
	// not (a stream cut off before its usage) is not Known: the gateway
	// then counts what it estimated.
	Known bool
}

// Total is the tokens a tokens-per-minute limit counts.
func (u Used) Total() int64 { return u.Prompt + u.Completion + u.Embedding }

// Used is the usage object u writes, as data: what ReadUsage reads of it.
func (u Usage) Used() Used {
	v := Used{Prompt: u.Prompt, Completion: u.Completion, Known: true}
	if u.HasCached {
		v.Cached = u.Cached
	}
	if u.HasCacheWrite {
		v.CacheWrite = u.CacheWrite
	}
	if u.HasCacheWrite1h {
		v.CacheWrite1h = u.CacheWrite1h
	}
	if u.HasReasoning {
		v.Reasoning = u.Reasoning
	}
	return v
}

// ReadUsage reads a unified usage object (a chat completion's or a usage
// chunk's "usage"), in one pass over it, with Fields: prompt_tokens,
// completion_tokens, and in their details cached_tokens,
// cache_write_tokens, cache_write_1h_tokens and reasoning_tokens. A count the object lacks is 0;
// of a key given twice the first counts, as a lookup by path reads it. A
// value that is no object (null, absent) is not Known.
func ReadUsage(v gjson.Result) Used {
	var u Used
	if !v.IsObject() {
		return u
	}
	var prompt, completion, cached, cacheWrite, cacheWrite1h, reasoning Count
	var promptDetails, completionDetails bool
	for k, x := range Fields(v.Raw) {
		switch k {
		case "prompt_tokens":
			prompt.Set(x)
		case "completion_tokens":
			completion.Set(x)
		case "prompt_tokens_details":
			if promptDetails {
				break
			}
			promptDetails = true
			for k, x := range Fields(x) {
				switch k {
				case "cached_tokens":
					cached.Set(x)
				case "cache_write_tokens":
					cacheWrite.Set(x)
				case "cache_write_1h_tokens":
					cacheWrite1h.Set(x)
				}
			}
		case "completion_tokens_details":
			if completionDetails {
				break
			}
			completionDetails = true
			for k, x := range Fields(x) {
				if k == "reasoning_tokens" {
					reasoning.Set(x)
					break
				}
			}
		}
	}
	u.Known = true
	u.Prompt, u.Completion, u.Cached, u.CacheWrite, u.Reasoning = prompt.N, completion.N, cached.N, cacheWrite.N, reasoning.N
	u.CacheWrite1h = cacheWrite1h.N
	return u
}

// ReadAnswerUsage reads the usage of a unified chat completion.
func ReadAnswerUsage(answer []byte) Used { return ReadUsage(gjson.Get(InPlace(answer), "usage")) }

// Count is a count read from a usage object: the first value given for
// its key, as a lookup by path reads it.
type Count struct {
	N    int64
	Seen bool // a value was given
}

// Set reads the count from x, a raw JSON value, the first time: what
// gjson's Int gives (plain digits read at once).
func (c *Count) Set(x string) {
	if c.Seen {
		return
	}
	c.Seen = true
	if n, ok := Digits(x); ok {
		c.N = n
		return
	}
	c.N = gjson.Parse(x).Int()
}

// Digits reads a JSON number written in up to 18 decimal digits alone,
// how nearly every count is written; ok is false for anything else (a
// sign, a fraction, an exponent, another type), which the callers leave
// to gjson.
func Digits(s string) (n int64, ok bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		n = n*10 + int64(d)
	}
	return n, true
}
