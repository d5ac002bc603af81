package quill

import (
	"errors"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// ChatStream returns a translator for one streamed answer.
func (c Chat) ChatStream(opts providers.StreamOptions) providers.StreamTranslator {
	return &stream{chat: c, opts: opts}
}

// stream translates one Quill stream, a line at a time, into unified
// chunks: the start line opens the stream with the assistant's role,
// each delta is a content chunk, the end line finishes the choice and
// ends the stream (with the usage chunk when the client asked for it),
// and an error line ends it with the mapped error.
type stream struct {
	chat   Chat
	opts   providers.StreamOptions
	chunks providers.Chunks
	done   bool // the unified stream has ended: nothing more is written
}

var _ providers.StreamEnder = (*stream)(nil)

var errMalformed = errors.New("quill: a stream line is not a JSON object")

// Event translates one line.
func (s *stream) Event(dst, line []byte) ([]byte, error) {
	if s.done {
		return dst, nil
	}
	if !providers.ValidJSON(line) {
		return dst, errMalformed
	}
	v := gjson.ParseBytes(line)
	if !v.IsObject() {
		return dst, errMalformed
	}
	if e := v.Get("error"); e.Exists() {
		s.done = true
		return s.chunks.Error(dst, mapError(502, e.Get("kind").Str, e.Get("detail").Str)), nil
	}
	if !s.chunks.Started() {
		model := jsonw.StrOf(v.Get("model"))
		if model.Empty() {
			model = jsonw.Plain(s.opts.Model)
		}
		// The head is copied into the chunks' own buffer: nothing of the
		// line is kept.
		s.chunks.Start(providers.Head{
			ID:      jsonw.StrOf(v.Get("id")).Prefixed("chatcmpl-"),
			Created: providers.Now(s.chat.Now).Unix(),
			Model:   model,
		}, s.opts.IncludeUsage)
		dst = s.chunks.Role(dst, 0)
	}
	if d := v.Get("delta"); d.Type == gjson.String && d.Str != "" {
		dst = s.chunks.Content(dst, 0, jsonw.StrOf(d))
	}
	if end := v.Get("end"); end.Exists() {
		s.done = true
		dst = s.chunks.Finish(dst, 0, finishReason(end.Str))
		dst = s.chunks.End(dst, usageOf(v.Get("tokens")))
	}
	return dst, nil
}

// Close ends a stream that ended before its end line with the
// stream_incomplete error.
func (s *stream) Close(dst []byte) []byte {
	if s.done {
		return dst
	}
	s.done = true
	return s.chunks.Incomplete(dst)
}

// Ended reports whether the unified stream has ended.
func (s *stream) Ended() bool { return s.done }

// Usage reports the usage of the end line, as data, whether the client
// asked for the usage chunk or not: not Known before it.
func (s *stream) Usage() providers.Used { return s.chunks.Used() }
