package providers

import (
	"strings"

	"github.com/modelgate/modelgate/providers/sse"
	"github.com/tidwall/gjson"
)

// Usage is the token counts of a unified "usage" object. The details
// objects are written only where the provider reported them.
type Usage struct {
	// Prompt includes cached (and cache-creation) tokens; Completion
	// includes reasoning tokens.
	Prompt, Completion, Total int64

	// Cached is prompt_tokens_details.cached_tokens, written when
	// HasCached.
	Cached    int64
	HasCached bool

	// Audio is prompt_tokens_details.audio_tokens, written when HasAudio.
	Audio    int64
	HasAudio bool

	// Reasoning is completion_tokens_details.reasoning_tokens, written
	// when HasReasoning.
	Reasoning    int64
	HasReasoning bool
}

// Append appends the unified usage object.
func (u Usage) Append(b []byte) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = AppendInt(b, u.Prompt)
	b = append(b, `,"completion_tokens":`...)
	b = AppendInt(b, u.Completion)
	b = append(b, `,"total_tokens":`...)
	b = AppendInt(b, u.Total)
	if u.HasCached || u.HasAudio {
		b = append(b, `,"prompt_tokens_details":{`...)
		if u.HasCached {
			b = append(b, `"cached_tokens":`...)
			b = AppendInt(b, u.Cached)
		}
		if u.HasAudio {
			if u.HasCached {
				b = append(b, ',')
			}
			b = append(b, `"audio_tokens":`...)
			b = AppendInt(b, u.Audio)
		}
		b = append(b, '}')
	}
	if u.HasReasoning {
		b = append(b, `,"completion_tokens_details":{"reasoning_tokens":`...)
		b = AppendInt(b, u.Reasoning)
		b = append(b, '}')
	}
	return append(b, '}')
}

// AppendChunkEnd appends the end of a unified chunk of one choice, after
// its delta and logprobs: the choice's finish_reason (finish, or null
// when it is ""), "usage": null when the client asked for usage (the last
// chunk alone carries it), and the blank line that ends the event.
func AppendChunkEnd(dst []byte, finish string, includeUsage bool) []byte {
	dst = append(dst, `,"finish_reason":`...)
	if finish == "" {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '"')
		dst = append(dst, finish...)
		dst = append(dst, '"')
	}
	dst = append(dst, "}]"...)
	if includeUsage {
		dst = append(dst, `,"usage":null`...)
	}
	return append(dst, "}\n\n"...)
}

// AppendUsageChunk appends the last chunk of a unified stream whose client
// asked for usage: no choices, and u. head is the start of every chunk of
// the stream, `{"id":…,"object":"chat.completion.chunk","created":…,"model":…,`.
func AppendUsageChunk(dst, head []byte, u Usage) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, head...)
	dst = append(dst, `"choices":[],"usage":`...)
	dst = u.Append(dst)
	return append(dst, "}\n\n"...)
}

// AppendStreamIncomplete appends the error event that ends a unified
// stream whose upstream stream ended before the answer was complete.
func AppendStreamIncomplete(dst []byte) []byte {
	return sse.AppendData(dst, StreamIncomplete().JSON())
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

// Append appends the joined text as a JSON string, or null when none was
// added.
func (j *TextJoin) Append(dst []byte) []byte {
	switch j.n {
	case 0:
		return append(dst, "null"...)
	case 1:
		return AppendRawString(dst, j.first)
	default:
		return AppendString(dst, j.joined.String())
	}
}
