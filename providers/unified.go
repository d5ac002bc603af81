package providers

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/jsonw"
)

// Usage is the token counts of a unified "usage" object. The details
// objects are written only where the provider reported them.
type Usage struct {
	// Prompt includes cached (and cache-creation) tokens; Completion
	// includes reasoning tokens.
	Prompt, Completion, Total int64

	// Cached is prompt_tokens_details.cached_tokens, written when
	// HasCached: prompt tokens read from the provider's prompt cache.
	Cached    int64
	HasCached bool

	// CacheWrite is prompt_tokens_details.cache_write_tokens, written when
	// HasCacheWrite: prompt tokens written to the provider's prompt cache
	// (Anthropic's cache_creation_input_tokens, Bedrock's
	// cacheWriteInputTokens), which providers bill above input.
	CacheWrite    int64
	HasCacheWrite bool

	// CacheWrite1h is prompt_tokens_details.cache_write_1h_tokens, written
	// when HasCacheWrite1h: of CacheWrite, the tokens written to a cache
	// that lasts an hour, which Anthropic bills at twice the input rate
	// (five minutes: one and a quarter), where the provider tells them
	// apart (Anthropic's cache_creation.ephemeral_1h_input_tokens,
	// Bedrock's cacheDetails).
	CacheWrite1h    int64
	HasCacheWrite1h bool

	// Audio is prompt_tokens_details.audio_tokens, written when HasAudio.
	Audio    int64
	HasAudio bool

	// Reasoning is completion_tokens_details.reasoning_tokens, written
	// when HasReasoning.
	Reasoning    int64
	HasReasoning bool
}

// Write writes the unified usage object into v.
func (u Usage) Write(v jsonw.Value) {
	o := v.Object()
	o.Int("prompt_tokens", u.Prompt)
	o.Int("completion_tokens", u.Completion)
	o.Int("total_tokens", u.Total)
	if u.HasCached || u.HasAudio || u.HasCacheWrite || u.HasCacheWrite1h {
		d := o.Object("prompt_tokens_details")
		if u.HasCached {
			d.Int("cached_tokens", u.Cached)
		}
		if u.HasCacheWrite {
			d.Int("cache_write_tokens", u.CacheWrite)
		}
		if u.HasCacheWrite1h {
			d.Int("cache_write_1h_tokens", u.CacheWrite1h)
		}
		if u.HasAudio {
			d.Int("audio_tokens", u.Audio)
		}
		d.End()
	}
	if u.HasReasoning {
		d := o.Object("completion_tokens_details")
		d.Int("reasoning_tokens", u.Reasoning)
		d.End()
	}
	o.End()
}

// TextJoin joins JSON strings into a unified message's content or
// reasoning_content. While there is one, its raw JSON form is kept (no
// copy, no escaping again); from the second on, their text is joined.
type TextJoin struct {
	first  gjson.Result
	joined strings.Builder
	n      int
}

// Add adds v, a JSON string (any other value counts as "").
func (j *TextJoin) Add(v gjson.Result) {
	switch j.n {
	case 0:
		j.first = v
	case 1:
		j.joined.WriteString(j.first.Str)
		fallthrough
	default:
		j.joined.WriteString(v.Str)
	}
	j.n++
}

// Len is the number of strings added.
func (j *TextJoin) Len() int { return j.n }

// Write writes the joined text as a JSON string into v, or null when
// none was added.
func (j *TextJoin) Write(v jsonw.Value) {
	switch j.n {
	case 0:
		v.Null()
	case 1:
		v.Text(jsonw.StrOf(j.first))
	default:
		v.Str(j.joined.String())
	}
}
