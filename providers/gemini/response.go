package gemini

import (
	"errors"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

var errNotResponse = errors.New("gemini: the answer is not a GenerateContentResponse")

// ChatResponse translates a GenerateContentResponse into a unified
// chat.completion, one choice per candidate:
//
//   - text parts are joined into content, thought parts (thought summaries)
//     into reasoning_content;
//   - functionCall parts become tool_calls, in order, with Gemini's id or a
//     generated "call_…" one, and the part's thought signature appended to
//     the id;
//   - a thought signature on a thought part becomes a thinking_blocks
//     entry holding the thought text since the previous entry; one on any
//     other part, an entry with empty thinking;
//   - logprobsResult becomes logprobs, usageMetadata usage;
//   - a prompt that Gemini blocked (promptFeedback.blockReason, no
//     candidates) becomes a choice with finish_reason content_filter and
//     the reason as refusal.
func (c Chat) ChatResponse(body []byte) ([]byte, error) {
	if !providers.ValidJSON(body) {
		return nil, errNotResponse
	}
	root := gjson.Parse(providers.InPlace(body))
	if !root.IsObject() {
		return nil, errNotResponse
	}
	r := readResponse(root)
	blocked := r.feedback.Get("blockReason")
	some := false
	r.candidates.ForEach(func(_, _ gjson.Result) bool {
		some = true
		return false
	})
	if !r.candidates.IsArray() && r.candidates.Exists() || !some && blocked.Type != gjson.String {
		// Neither an answer nor a blocked prompt: nothing a client can use.
		return nil, errNotResponse
	}

	b := make([]byte, 0, len(body)+256)
	b = c.appendHead(b, r.responseID, r.modelVersion, "chat.completion")
	b = append(b, `"choices":[`...)
	n := 0
	r.candidates.ForEach(func(_, cand gjson.Result) bool {
		if n > 0 {
			b = append(b, ',')
		}
		b = c.appendChoice(b, cand, n)
		n++
		return true
	})
	if n == 0 && blocked.Type == gjson.String {
		b = append(b, `{"index":0,"message":{"role":"assistant","content":null,"refusal":`...)
		b = providers.AppendString(b, blockedMessage(r.feedback))
		b = append(b, `},"logprobs":null,"finish_reason":"content_filter"}`...)
	}
	b = append(b, `],"usage":`...)
	var u usage
	u.set(r.usage)
	b = u.unified().Append(b)
	switch r.usage.Get("serviceTier").Str {
	case "standard":
		b = append(b, `,"service_tier":"default"`...)
	case "flex":
		b = append(b, `,"service_tier":"flex"`...)
	case "priority":
		b = append(b, `,"service_tier":"priority"`...)
	}
	return append(b, '}'), nil
}

// blockedMessage says why Gemini blocked a prompt.
func blockedMessage(feedback gjson.Result) string {
	msg := "the provider blocked the prompt (" + feedback.Get("blockReason").Str + ")"
	if m := feedback.Get("blockReasonMessage").Str; m != "" {
		msg += ": " + m
	}
	return msg
}

// appendHead appends the fields every chat.completion (chunk) starts with,
// up to "choices": id, object, created and model.
func (c Chat) appendHead(b []byte, responseID, modelVersion gjson.Result, object string) []byte {
	b = append(b, `{"id":"chatcmpl-`...)
	if responseID.Type == gjson.String && responseID.Str != "" {
		n := len(b)
		b = providers.AppendString(b, responseID.Str)
		copy(b[n:], b[n+1:len(b)-1]) // without AppendString's quotes
		b = b[:len(b)-2]
	} else {
		b = append(b, c.id()...)
	}
	b = append(b, `","object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = providers.AppendInt(b, c.now().Unix())
	b = append(b, `,"model":`...)
	b = providers.AppendRawString(b, modelVersion)
	return append(b, ',')
}

// part is one Gemini part, read.
type part struct {
	text, signature, functionCall gjson.Result
	thought                       bool
}

func readPart(v gjson.Result) part {
	var p part
	v.ForEach(func(key, v gjson.Result) bool {
		switch key.Str {
		case "text":
			p.text = v
		case "thought":
			p.thought = v.Type == gjson.True
		case "thoughtSignature":
			if v.Type == gjson.String && v.Str != "" {
				p.signature = v
			}
		case "functionCall":
			if v.IsObject() {
				p.functionCall = v
			}
		}
		return true
	})
	return p
}

// block is one thinking_blocks entry: the thought texts thoughts[from:to]
// (none for the signature of a text or other part) and the signature.
type block struct {
	from, to int
	sig      gjson.Result
}

// answer collects what one candidate's parts say.
type answer struct {
	thoughts, texts []gjson.Result
	blocks          []block
	calls           []part
	blockFrom       int // thoughts not yet in a block start here
}

func (a *answer) add(p part) {
	switch {
	case p.functionCall.Exists():
		a.calls = append(a.calls, p)
		return
	case p.text.Type == gjson.String && p.thought:
		if p.text.Str != "" {
			a.thoughts = append(a.thoughts, p.text)
		}
		if p.signature.Exists() {
			a.blocks = append(a.blocks, block{from: a.blockFrom, to: len(a.thoughts), sig: p.signature})
			a.blockFrom = len(a.thoughts)
		}
		return
	case p.text.Type == gjson.String && p.text.Str != "":
		a.texts = append(a.texts, p.text)
	}
	if p.signature.Exists() {
		a.blocks = append(a.blocks, block{from: -1, to: -1, sig: p.signature})
	}
}

// response holds the fields of a GenerateContentResponse (or of one
// event of a stream) that the translation reads.
type response struct {
	responseID, modelVersion, candidates, usage, feedback, err gjson.Result
}

// readResponse reads a GenerateContentResponse in one pass; of duplicate
// keys the last counts.
func readResponse(root gjson.Result) response {
	var r response
	root.ForEach(func(key, v gjson.Result) bool {
		if f := r.member(key.Str); f != nil {
			*f = v
		}
		return true
	})
	return r
}

// member is where readResponse keeps the member named key, or nil.
func (r *response) member(key string) *gjson.Result {
	switch key {
	case "responseId":
		return &r.responseID
	case "modelVersion":
		return &r.modelVersion
	case "candidates":
		return &r.candidates
	case "usageMetadata":
		return &r.usage
	case "promptFeedback":
		return &r.feedback
	case "error":
		return &r.err
	}
	return nil
}

// readCandidate reads the fields of a candidate the translation uses, in
// one pass; of duplicate keys the last counts.
func readCandidate(cand gjson.Result) (content, finish, logprobs, index gjson.Result) {
	cand.ForEach(func(key, v gjson.Result) bool {
		switch key.Str {
		case "content":
			content = v
		case "finishReason":
			finish = v
		case "logprobsResult":
			logprobs = v
		case "index":
			index = v
		}
		return true
	})
	return content, finish, logprobs, index
}

// appendChoice appends the choice of candidate cand, the n-th in the answer.
func (c Chat) appendChoice(b []byte, cand gjson.Result, n int) []byte {
	content, finish, logprobs, index := readCandidate(cand)
	var a answer
	content.Get("parts").ForEach(func(_, v gjson.Result) bool {
		a.add(readPart(v))
		return true
	})

	b = append(b, `{"index":`...)
	if index.Type == gjson.Number {
		b = append(b, index.Raw...)
	} else {
		b = providers.AppendInt(b, int64(n))
	}
	b = append(b, `,"message":{"role":"assistant","content":`...)
	if len(a.texts) == 0 {
		b = append(b, "null"...)
	} else {
		b = appendJoined(b, a.texts)
	}
	b = append(b, `,"refusal":null`...)
	if len(a.thoughts) > 0 {
		b = append(b, `,"reasoning_content":`...)
		b = appendJoined(b, a.thoughts)
	}
	if len(a.blocks) > 0 {
		b = append(b, `,"thinking_blocks":[`...)
		for i, blk := range a.blocks {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"thinking","thinking":`...)
			if blk.from < 0 || blk.from == blk.to {
				b = append(b, `""`...)
			} else {
				b = appendJoined(b, a.thoughts[blk.from:blk.to])
			}
			b = append(b, `,"signature":`...)
			b = append(b, blk.sig.Raw...)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(a.calls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, p := range a.calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = c.appendToolCall(b, p, -1)
		}
		b = append(b, ']')
	}
	b = append(b, `},"logprobs":`...)
	if logprobs.IsObject() {
		b = appendLogprobs(b, logprobs)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"finish_reason":"`...)
	b = append(b, finishReason(finish.Str, len(a.calls) > 0)...)
	return append(b, `"}`...)
}

// appendToolCall appends a tool call for a functionCall part: with its
// stream index when index >= 0, and its arguments as compact JSON.
func (c Chat) appendToolCall(b []byte, p part, index int) []byte {
	fc := p.functionCall
	b = append(b, '{')
	if index >= 0 {
		b = append(b, `"index":`...)
		b = providers.AppendInt(b, int64(index))
		b = append(b, ',')
	}
	b = append(b, `"id":`...)
	b = appendCallID(b, fc.Get("id").Str, p.signature.Str, c.id)
	b = append(b, `,"type":"function","function":{"name":`...)
	b = providers.AppendRawString(b, fc.Get("name"))
	b = append(b, `,"arguments":`...)
	if index >= 0 {
		b = append(b, `""`...) // the arguments follow in their own delta
	} else {
		b = appendArguments(b, fc.Get("args"))
	}
	return append(b, "}}"...)
}

// appendArguments appends a function call's args as a JSON string of
// compact JSON; "{}" when there are none.
func appendArguments(b []byte, args gjson.Result) []byte {
	if !args.IsObject() {
		return append(b, `"{}"`...)
	}
	return providers.AppendString(b, providers.CompactJSON(args.Raw))
}

// appendJoined appends the JSON strings parts joined into one.
func appendJoined(b []byte, parts []gjson.Result) []byte {
	if len(parts) == 1 {
		return append(b, parts[0].Raw...)
	}
	n := 0
	for _, p := range parts {
		n += len(p.Str)
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, p := range parts {
		sb.WriteString(p.Str)
	}
	return providers.AppendString(b, sb.String())
}

// appendLogprobs appends OpenAI's logprobs object for a logprobsResult:
// for each chosen token, its log probability, its UTF-8 bytes and the top
// candidates of the same step.
func appendLogprobs(b []byte, lr gjson.Result) []byte {
	top := lr.Get("topCandidates").Array()
	b = append(b, `{"content":[`...)
	i := 0
	lr.Get("chosenCandidates").ForEach(func(_, ch gjson.Result) bool {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTokenLogprob(b, ch)
		b = b[:len(b)-1]
		b = append(b, `,"top_logprobs":[`...)
		if i < len(top) {
			k := 0
			top[i].Get("candidates").ForEach(func(_, tc gjson.Result) bool {
				if k > 0 {
					b = append(b, ',')
				}
				k++
				b = appendTokenLogprob(b, tc)
				return true
			})
		}
		b = append(b, "]}"...)
		i++
		return true
	})
	return append(b, `],"refusal":null}`...)
}

// appendTokenLogprob appends {"token","logprob","bytes"} for a Gemini
// candidate {token, tokenId, logProbability}.
func appendTokenLogprob(b []byte, tc gjson.Result) []byte {
	tok := tc.Get("token").Str
	b = append(b, `{"token":`...)
	b = providers.AppendString(b, tok)
	b = append(b, `,"logprob":`...)
	if lp := tc.Get("logProbability"); lp.Type == gjson.Number {
		b = append(b, lp.Raw...)
	} else {
		b = append(b, '0')
	}
	b = append(b, `,"bytes":[`...)
	for i := 0; i < len(tok); i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = providers.AppendInt(b, int64(tok[i]))
	}
	return append(b, "]}"...)
}

// usage is Gemini's usageMetadata.
type usage struct {
	prompt, candidates, thoughts, toolUse, cached, total, audio int64
	audioSeen                                                   bool
}

// set replaces u with an usageMetadata object, when there is one: each
// carries all counts so far, and proto3 JSON leaves out the zero ones.
func (u *usage) set(v gjson.Result) {
	if !v.IsObject() {
		return
	}
	*u = usage{}
	v.ForEach(func(key, n gjson.Result) bool {
		switch key.Str {
		case "promptTokenCount":
			u.prompt = n.Int()
		case "candidatesTokenCount":
			u.candidates = n.Int()
		case "thoughtsTokenCount":
			u.thoughts = n.Int()
		case "toolUsePromptTokenCount":
			u.toolUse = n.Int()
		case "cachedContentTokenCount":
			u.cached = n.Int()
		case "totalTokenCount":
			u.total = n.Int()
		case "promptTokensDetails":
			n.ForEach(func(_, d gjson.Result) bool {
				if d.Get("modality").Str == "AUDIO" {
					u.audio += d.Get("tokenCount").Int()
					u.audioSeen = true
				}
				return true
			})
		}
		return true
	})
}

// unified is the unified usage: the prompt counts tool-use prompts
// (results of Gemini's own tools) too, the completion counts thoughts, of
// which cached and reasoning tokens are the details.
func (u *usage) unified() providers.Usage {
	prompt := u.prompt + u.toolUse
	completion := u.candidates + u.thoughts
	total := u.total
	if total == 0 {
		total = prompt + completion
	}
	return providers.Usage{
		Prompt: prompt, Completion: completion, Total: total,
		Cached: u.cached, HasCached: true,
		Audio: u.audio, HasAudio: u.audioSeen,
		Reasoning: u.thoughts, HasReasoning: true,
	}
}
