package gemini

import (
	"errors"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
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
func (c Chat) ChatResponse(body []byte) ([]byte, providers.Used, error) {
	if !providers.ValidJSON(body) {
		return nil, providers.Used{}, errNotResponse
	}
	root := gjson.Parse(providers.InPlace(body))
	if !root.IsObject() {
		return nil, providers.Used{}, errNotResponse
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
		return nil, providers.Used{}, errNotResponse
	}

	w := jsonw.New(make([]byte, 0, len(body)+256))
	comp := providers.StartCompletion(&w, c.head(r.responseID, r.modelVersion))
	n := 0
	var idBuf [128]byte
	r.candidates.ForEach(func(_, cand gjson.Result) bool {
		c.writeChoice(comp, cand, n, idBuf[:0])
		n++
		return true
	})
	if n == 0 && blocked.Type == gjson.String {
		m := comp.Choice(0)
		m.NullContent()
		m.Refusal(jsonw.Plain(blockedMessage(r.feedback)))
		m.End("content_filter")
	}
	var u usage
	u.set(r.usage)
	used := u.unified()
	comp.Usage(used)
	switch r.usage.Get("serviceTier").Str {
	case "standard":
		comp.ServiceTier("default")
	case "flex", "priority":
		comp.ServiceTier(r.usage.Get("serviceTier").Str)
	}
	out, err := comp.Finish()
	return out, used.Used(), err
}

// blockedMessage says why Gemini blocked a prompt.
func blockedMessage(feedback gjson.Result) string {
	msg := "the provider blocked the prompt (" + feedback.Get("blockReason").Str + ")"
	if m := feedback.Get("blockReasonMessage").Str; m != "" {
		msg += ": " + m
	}
	return msg
}

// head is the head of a chat.completion and its chunks: the id
// "chatcmpl-" and Gemini's responseId (or a generated one), the time, and
// modelVersion.
func (c Chat) head(responseID, modelVersion gjson.Result) providers.Head {
	id := jsonw.Plain(responseID.Str)
	if responseID.Type != gjson.String || responseID.Str == "" {
		id = jsonw.Plain(c.id())
	}
	return providers.Head{ID: id.Prefixed("chatcmpl-"), Created: c.now().Unix(), Model: jsonw.StrOf(modelVersion)}
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

// writeChoice writes the choice of candidate cand, the n-th in the
// answer; idBuf is room for its tool call ids.
func (c Chat) writeChoice(comp providers.Completion, cand gjson.Result, n int, idBuf []byte) {
	content, finish, logprobs, index := readCandidate(cand)
	var a answer
	content.Get("parts").ForEach(func(_, v gjson.Result) bool {
		a.add(readPart(v))
		return true
	})

	var m providers.Message
	if index.Type == gjson.Number {
		m = comp.ChoiceRaw(index.Raw)
	} else {
		m = comp.Choice(int64(n))
	}
	if len(a.texts) == 0 {
		m.NullContent()
	} else {
		m.Content(joined(a.texts))
	}
	m.NullRefusal()
	if len(a.thoughts) > 0 {
		m.Reasoning(joined(a.thoughts))
	}
	if len(a.blocks) > 0 {
		tb := m.ThinkingBlocks()
		for _, blk := range a.blocks {
			thinking := jsonw.Plain("")
			if blk.from >= 0 && blk.from != blk.to {
				thinking = joined(a.thoughts[blk.from:blk.to])
			}
			providers.WriteThinkingBlock(tb, thinking, jsonw.Lit(blk.sig.Raw))
		}
		tb.End()
	}
	if len(a.calls) > 0 {
		calls := m.ToolCalls()
		for _, p := range a.calls {
			fc := p.functionCall
			idBuf = appendCallID(idBuf[:0], fc.Get("id").Str, p.signature.Str, c.id)
			calls.Call(jsonw.Plain(providers.InPlace(idBuf)), jsonw.StrOf(fc.Get("name")), arguments(fc.Get("args")))
		}
		calls.End()
	}
	reason := finishReason(finish.Str, len(a.calls) > 0)
	if logprobs.IsObject() {
		writeLogprobs(m.Logprobs(), logprobs)
		m.Finish(reason)
	} else {
		m.End(reason)
	}
}

// arguments is a function call's args as a JSON string of compact JSON;
// "{}" when there are none.
func arguments(args gjson.Result) jsonw.Text {
	if !args.IsObject() {
		return jsonw.Plain("{}")
	}
	return jsonw.Plain(providers.CompactJSON(args.Raw))
}

// joined is the JSON strings parts joined into one.
func joined(parts []gjson.Result) jsonw.Text {
	if len(parts) == 1 {
		return jsonw.Lit(parts[0].Raw)
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
	return jsonw.Plain(sb.String())
}

// writeLogprobs writes OpenAI's logprobs object for a logprobsResult: for
// each chosen token, its log probability, its UTF-8 bytes and the top
// candidates of the same step.
func writeLogprobs(v jsonw.Value, lr gjson.Result) {
	top := lr.Get("topCandidates").Array()
	o := v.Object()
	content := o.Array("content")
	i := 0
	lr.Get("chosenCandidates").ForEach(func(_, ch gjson.Result) bool {
		t := content.Object()
		writeTokenLogprob(t, ch)
		tops := t.Array("top_logprobs")
		if i < len(top) {
			top[i].Get("candidates").ForEach(func(_, tc gjson.Result) bool {
				tt := tops.Object()
				writeTokenLogprob(tt, tc)
				tt.End()
				return true
			})
		}
		tops.End()
		t.End()
		i++
		return true
	})
	content.End()
	o.Null("refusal")
	o.End()
}

// writeTokenLogprob writes token, logprob and bytes into o for a Gemini
// candidate {token, tokenId, logProbability}.
func writeTokenLogprob(o jsonw.Object, tc gjson.Result) {
	tok := tc.Get("token").Str
	o.Str("token", tok)
	if lp := tc.Get("logProbability"); lp.Type == gjson.Number {
		o.Raw("logprob", lp.Raw)
	} else {
		o.Int("logprob", 0)
	}
	bytes := o.Array("bytes")
	for i := 0; i < len(tok); i++ {
		bytes.Int(int64(tok[i]))
	}
	bytes.End()
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
