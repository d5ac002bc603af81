package gemini

import (
	"errors"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
	"github.com/modelgate/modelgate/providers/sse"
)

// ChatStream returns a translator for one streamed answer
// (streamGenerateContent with alt=sse).
func (c Chat) ChatStream(opts providers.StreamOptions) providers.StreamTranslator {
	return &stream{chat: c, includeUsage: opts.IncludeUsage}
}

// candidateState is what a stream remembers of one candidate (choice).
type candidateState struct {
	started  bool   // the role chunk went out
	finished bool   // the finish chunk went out
	calls    int    // tool calls so far: the next one's index
	thoughts []byte // thought text since the last thinking block
}

// stream translates Gemini's server-sent events into unified chunks.
//
// Each event's data is a whole GenerateContentResponse holding only what is
// new: the next parts of each candidate, its finishReason once it is done,
// and usageMetadata. Gemini sends no end-of-stream event; the stream is
// complete when every candidate has finished, and an error object may come
// instead of a response.
type stream struct {
	chat         Chat
	includeUsage bool

	chunks providers.Chunks
	cands  []candidateState
	id     []byte // room for a tool call's id
	usage  usage
	done   bool // an error event went out: nothing more follows
}

var errMalformed = errors.New("gemini: stream event data is not a JSON object")

// maxCandidates bounds the candidate index a stream accepts (Gemini's
// candidateCount is at most 8).
const maxCandidates = 64

// Event translates one upstream event.
func (s *stream) Event(dst, event []byte) ([]byte, error) {
	if s.done {
		return dst, nil
	}
	var data []byte
	if len(event) > 0 && (event[0] == '{' || event[0] == '[') {
		data = event // a bare JSON error, as the framing cut it
	} else if _, data = sse.Fields(event); len(data) == 0 || string(data) == "[DONE]" {
		return dst, nil // a comment, or an end marker Gemini itself never sends
	}
	if !providers.ValidJSON(data) {
		return dst, errMalformed
	}
	v := gjson.Parse(providers.InPlace(data))
	if v.IsArray() {
		v = v.Get("0")
	}
	if !v.IsObject() {
		return dst, errMalformed
	}
	r := readResponse(v)
	if r.err.Exists() {
		s.done = true
		return s.chunks.Error(dst, mapError(0, r.err)), nil
	}
	if !s.chunks.Started() {
		s.chunks.Start(s.chat.head(r.responseID, r.modelVersion), s.includeUsage)
	}
	s.usage.set(r.usage)

	n := 0
	r.candidates.ForEach(func(_, cand gjson.Result) bool {
		dst = s.candidate(dst, cand, n)
		n++
		return true
	})
	if blocked := r.feedback.Get("blockReason"); n == 0 && blocked.Type == gjson.String && len(s.cands) == 0 {
		st := s.state(0)
		st.started, st.finished = true, true
		dst = s.chunks.Refusal(dst, 0, blockedMessage(r.feedback))
	}
	return dst, nil
}

// state returns the state of candidate i, creating it.
func (s *stream) state(i int) *candidateState {
	for len(s.cands) <= i {
		s.cands = append(s.cands, candidateState{})
	}
	return &s.cands[i]
}

// candidate translates one candidate of an event, the n-th in it.
func (s *stream) candidate(dst []byte, cand gjson.Result, n int) []byte {
	content, finish, logprobs, index := readCandidate(cand)
	i := n
	if index.Type == gjson.Number {
		i = int(index.Int())
	}
	if i < 0 || i >= maxCandidates {
		return dst
	}
	st := s.state(i)
	if st.finished {
		return dst
	}
	if !st.started {
		st.started = true
		dst = s.chunks.Role(dst, i)
	}

	content.Get("parts").ForEach(func(_, v gjson.Result) bool {
		p := readPart(v)
		switch {
		case p.functionCall.Exists():
			k := st.calls
			st.calls++
			fc := p.functionCall
			s.id = appendCallID(s.id[:0], fc.Get("id").Str, p.signature.Str, s.chat.id)
			dst = s.chunks.ToolCallStart(dst, i, k, jsonw.Plain(providers.InPlace(s.id)), jsonw.StrOf(fc.Get("name")))
			dst = s.chunks.ToolCallArguments(dst, i, k, arguments(fc.Get("args")))
			return true
		case p.text.Type == gjson.String && p.thought:
			if p.text.Str != "" {
				st.thoughts = append(st.thoughts, p.text.Str...)
				dst = s.chunks.Reasoning(dst, i, jsonw.Lit(p.text.Raw))
			}
			if p.signature.Exists() {
				dst = s.thinkingBlock(dst, i, string(st.thoughts), p.signature)
				st.thoughts = st.thoughts[:0]
			}
			return true
		case p.text.Type == gjson.String && p.text.Str != "":
			dst = s.chunks.Content(dst, i, jsonw.Lit(p.text.Raw))
		}
		if p.signature.Exists() {
			dst = s.thinkingBlock(dst, i, "", p.signature)
		}
		return true
	})

	if logprobs.IsObject() {
		w := jsonw.New(nil)
		writeLogprobs(w.Value(), logprobs)
		lp, err := w.Finish()
		if err != nil {
			lp = []byte("null")
		}
		dst = s.chunks.Logprobs(dst, i, providers.InPlace(lp))
	}
	if finish.Type == gjson.String && finish.Str != "" {
		st.finished = true
		dst = s.chunks.Finish(dst, i, finishReason(finish.Str, st.calls > 0))
	}
	return dst
}

// thinkingBlock appends a chunk whose delta holds one complete
// thinking_blocks entry.
func (s *stream) thinkingBlock(dst []byte, i int, thinking string, sig gjson.Result) []byte {
	return s.chunks.ThinkingBlock(dst, i, jsonw.Plain(thinking), jsonw.Lit(sig.Raw))
}

// Close ends the unified stream: with the usage chunk (when asked for) and
// data: [DONE] when every candidate finished, with an error event when the
// upstream stream ended before that.
// Ended implements providers.StreamEnder: only an error event ends the
// stream before Close, which writes data: [DONE].
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
	complete := len(s.cands) > 0
	for i := range s.cands {
		if s.cands[i].started && !s.cands[i].finished {
			complete = false
		}
	}
	if !complete {
		return s.chunks.Incomplete(dst)
	}
	return s.chunks.End(dst, s.usage.unified())
}

// Framing is how Gemini's streams are cut into events: server-sent events,
// except that an error during the stream comes as bare JSON ({"error":…},
// pretty-printed over several lines, without "data:"), as Google's SDKs
// expect (python-genai reads it by counting braces). Such a JSON value is
// cut as one event of its own.
var Framing providers.Framing = framing{}

type framing struct{}

func (framing) IsStream(contentType string) bool { return providers.SSE.IsStream(contentType) }

func (framing) Cut(buf []byte) (event, rest []byte, ok bool, err error) {
	i := 0
	for i < len(buf) && (buf[i] == '\n' || buf[i] == '\r') {
		i++
	}
	if i == len(buf) || buf[i] != '{' && buf[i] != '[' {
		event, rest, ok = sse.Cut(buf)
		return event, rest, ok, nil
	}
	end, complete := jsonEnd(buf[i:])
	if !complete {
		if len(buf)-i > maxBareJSON {
			return nil, buf, false, errBareJSON
		}
		return nil, buf, false, nil
	}
	return buf[i : i+end], buf[i+end:], true, nil
}

// maxBareJSON bounds a bare JSON value in a stream, which the framing must
// hold whole before it can cut it.
const maxBareJSON = 1 << 20

var errBareJSON = errors.New("gemini: the stream holds an unterminated JSON value")

// jsonEnd finds the end of the JSON object or array that b starts with, by
// counting brackets outside strings.
func jsonEnd(b []byte) (int, bool) {
	depth := 0
	var s providers.JSONScan
	for i := 0; i < len(b); i++ {
		if !s.Outside(b[i]) {
			continue
		}
		switch b[i] {
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}
