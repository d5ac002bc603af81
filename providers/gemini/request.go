package gemini

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// request holds the unified request fields the translation reads. The zero
// gjson.Result stands for an absent field.
type request struct {
	messages, maxTokens, maxCompletionTokens, stop, temperature, topP, n, seed gjson.Result
	presencePenalty, frequencyPenalty, logprobs, topLogprobs, responseFormat   gjson.Result
	reasoningEffort, tools, toolChoice, stream, serviceTier                    gjson.Result
	webSearch                                                                  gjson.Result
}

// set records one top-level field of the unified request, or rejects it
// when Gemini cannot express it. Fields not listed are dropped: they tune
// only OpenAI's own service (store, metadata, logit_bias, prompt caching,
// prediction, verbosity, user and safety_identifier) or have no Gemini
// equivalent (parallel_tool_calls).
func (c Chat) set(r *request, key string, v gjson.Result) error {
	switch key {
	case "messages":
		r.messages = v
	case "max_tokens":
		r.maxTokens = v
	case "max_completion_tokens":
		r.maxCompletionTokens = v
	case "stop":
		r.stop = v
	case "temperature":
		r.temperature = v
	case "top_p":
		r.topP = v
	case "n":
		r.n = v
	case "seed":
		r.seed = v
	case "presence_penalty":
		r.presencePenalty = v
	case "frequency_penalty":
		r.frequencyPenalty = v
	case "logprobs":
		r.logprobs = v
	case "top_logprobs":
		r.topLogprobs = v
	case "response_format":
		r.responseFormat = v
		switch t := v.Get("type"); t.Str {
		case "", "text", "json_object", "json_schema":
		default:
			return c.unsupported("response_format", "response_format "+strconv.Quote(t.Str)+" is not supported")
		}
	case "reasoning_effort":
		r.reasoningEffort = v
	case "tools":
		r.tools = v
	case "web_search_options":
		if v.IsObject() {
			r.webSearch = v
		}
	case "tool_choice":
		r.toolChoice = v
	case "stream":
		r.stream = v
	case "service_tier":
		r.serviceTier = v
	case "modalities":
		if providers.WantsAudio(v) {
			return c.unsupported("modalities", "audio output is not supported")
		}
	default:
		return providers.NoEquivalent(key, v, c.name())
	}
	return nil
}

// ChatRequest translates a unified chat request, already checked by
// providers.ValidateChat, into a generateContent (or, for stream: true, a
// streamGenerateContent with alt=sse) request for model.
//
// System and developer messages become systemInstruction; user and tool
// messages become user contents, assistant messages model contents, and
// consecutive messages of the same resulting role merge into one content,
// so all tool results of one turn share a content. Tool results become
// functionResponse parts named after the tool call they answer. Thought
// signatures come back from where ChatResponse put them: tool call ids and
// thinking_blocks.
func (c Chat) ChatRequest(body []byte, model string) (providers.Request, error) {
	var r request
	var err error
	gjson.Parse(providers.InPlace(body)).ForEach(func(key, v gjson.Result) bool {
		err = c.set(&r, key.Str, v)
		return err == nil
	})
	if err != nil {
		return providers.Request{}, err
	}

	stream := r.stream.Type == gjson.True
	path, err := c.path(model, stream)
	if err != nil {
		return providers.Request{}, err
	}
	req := providers.Request{Path: path, Framing: Framing}
	if stream {
		req.Query = "alt=sse"
	}
	fam := familyOf(model)

	var stack [16]message
	msgs := providers.AppendChatMessages(stack[:0], r.messages)

	w := contents{w: jsonw.New(make([]byte, 0, len(body)+256))}
	o := w.w.Object()
	o.Key("contents")
	w.w.OpenArray()
	if err := c.writeContents(&w, msgs, fam); err != nil {
		return req, err
	}
	w.w.CloseArray()
	writeSystem(o, msgs)
	if err = c.writeTools(o, &r); err != nil {
		return req, err
	}
	if err = c.writeGenerationConfig(o, &r, fam); err != nil {
		return req, err
	}
	switch r.serviceTier.Str {
	case "default":
		o.Str("serviceTier", "standard")
	case "flex", "priority":
		o.Str("serviceTier", r.serviceTier.Str)
	}
	o.End()
	req.Body, err = w.w.Finish()
	return req, err
}

// message is a unified message as the translation reads it.
type message = providers.ChatMessage

// contents writes the contents array, opening a content when the first
// part of a new role comes, so that runs of one role share a content and
// messages without parts leave no empty content behind.
type contents struct {
	w     jsonw.Writer // in the contents array
	role  string       // the open content's role; "" when none is open
	calls int          // functionCall parts in the open content
	n     int          // contents opened
}

// part prepares for one more part of role.
func (w *contents) part(role string) {
	if w.role == role {
		return
	}
	w.close()
	w.n++
	w.role, w.calls = role, 0
	w.w.OpenObject()
	w.w.Key("role")
	w.w.Str(role)
	w.w.Key("parts")
	w.w.OpenArray()
}

func (w *contents) close() {
	if w.role != "" {
		w.w.CloseArray()
		w.w.CloseObject()
		w.role = ""
	}
}

// text appends a text part for the JSON string text (nothing for an empty
// one, which Gemini refuses, unless it carries a signature). sig is the raw
// JSON string of a thoughtSignature, or "".
func (w *contents) text(role string, text gjson.Result, thought bool, sig string) {
	if (text.Type != gjson.String || text.Str == "") && sig == "" {
		return
	}
	w.part(role)
	p := w.w.Next().Object()
	p.Text("text", jsonw.StrOf(text))
	if thought {
		p.Bool("thought", true)
	}
	if sig != "" {
		p.Raw("thoughtSignature", sig)
	}
	p.End()
}

// writeContents writes every non-system message into w.
func (c Chat) writeContents(w *contents, msgs []message, fam family) error {
	// Gemini 3 validates the signatures of the current turn: the model
	// contents after the last user message with content of its own.
	lastUser := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" && hasContent(msgs[i].Content) {
			lastUser = i
			break
		}
	}
	var names map[string]gjson.Result // tool call id → function name, latest first
	for i := range msgs {
		m := &msgs[i]
		var err error
		switch m.Role {
		case "user":
			err = c.userParts(w, m, i)
		case "assistant":
			err = c.modelParts(w, m, i, fam.levels && i > lastUser)
			m.ToolCalls.ForEach(func(_, call gjson.Result) bool {
				if names == nil {
					names = make(map[string]gjson.Result)
				}
				names[call.Get("id").Str] = call.Get("function.name")
				return true
			})
		case "tool":
			err = toolResult(w, m, i, names)
		}
		if err != nil {
			return err
		}
	}
	w.close()
	if w.n == 0 {
		return providers.InvalidParam("messages", "messages must contain a user or assistant message with content")
	}
	return nil
}

// hasContent reports whether user content holds anything but empty text.
func hasContent(content gjson.Result) bool {
	if content.Type == gjson.String {
		return content.Str != ""
	}
	found := false
	content.ForEach(func(_, part gjson.Result) bool {
		t := part.Get("type").Str
		found = t != "text" && t != "refusal" || providers.PartText(part).Str != ""
		return !found
	})
	return found
}

func partParam(i, j int) string {
	return "messages[" + strconv.Itoa(i) + "].content[" + strconv.Itoa(j) + "]"
}

// userParts appends the parts of user message i.
func (c Chat) userParts(w *contents, m *message, i int) error {
	if m.Content.Type == gjson.String {
		w.text("user", m.Content, false, "")
		return nil
	}
	var err error
	j := 0
	m.Content.ForEach(func(_, part gjson.Result) bool {
		switch part.Get("type").Str {
		case "image_url":
			err = c.image(w, part.Get("image_url.url"), partParam(i, j)+".image_url.url")
		case "input_audio":
			err = c.audio(w, part.Get("input_audio"), partParam(i, j)+".input_audio")
		case "file":
			err = c.file(w, part.Get("file"), partParam(i, j)+".file")
		default: // text, refusal
			w.text("user", providers.PartText(part), false, "")
		}
		j++
		return err == nil
	})
	return err
}

// inline appends an inlineData part.
func (w *contents) inline(mime, data string) {
	w.part("user")
	p := w.w.Next().Object()
	d := p.Object("inlineData")
	d.Str("mimeType", mime)
	d.Str("data", data)
	d.End()
	p.End()
}

// dataURL splits data:<media type>;base64,<data>.
func dataURL(u string) (mime, data string, ok bool) {
	if len(u) < 5 || !strings.EqualFold(u[:5], "data:") {
		return "", "", false
	}
	meta, data, found := strings.Cut(u[5:], ",")
	mime, _, _ = strings.Cut(meta, ";")
	if !found || mime == "" || !strings.HasSuffix(strings.ToLower(meta), ";base64") {
		return "", "", false
	}
	return strings.ToLower(mime), data, true
}

// image appends the part for an image_url part's URL: inlineData for a
// data URL; fileData for an http(s) or gs URL, with the media type its
// file extension names, since Vertex AI requires one and Gemini cannot
// guess it.
func (c Chat) image(w *contents, url gjson.Result, param string) error {
	u := url.Str
	if mime, data, ok := dataURL(u); ok {
		w.inline(mime, data)
		return nil
	}
	if len(u) >= 5 && strings.EqualFold(u[:5], "data:") {
		return providers.InvalidParam(param, "an image data URL must look like data:<media type>;base64,<data>")
	}
	scheme, _, _ := strings.Cut(u, ":")
	switch strings.ToLower(scheme) {
	case "http", "https", "gs":
	default:
		return providers.InvalidParam(param, "an image URL must be a data:, http(s): or gs: URL")
	}
	mime := mimeByExtension(u)
	if mime == "" {
		return c.unsupported(param, "the image URL must end in a file extension that names its type "+
			"(.png, .jpg, .jpeg, .webp, .heic, .heif, .gif, .pdf, …), because Gemini needs the media type of a URL it fetches; "+
			"or send the image as a data: URL")
	}
	w.part("user")
	p := w.w.Next().Object()
	d := p.Object("fileData")
	d.Str("mimeType", mime)
	d.Raw("fileUri", url.Raw)
	d.End()
	p.End()
	return nil
}

// mimeByExtension is the media type Gemini takes for the file extension
// that ends a URL's path or a file name, or "" for an unknown one.
func mimeByExtension(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	dot := strings.LastIndexByte(u, '.')
	if dot < 0 || strings.IndexByte(u[dot:], '/') >= 0 {
		return ""
	}
	switch strings.ToLower(u[dot+1:]) {
	case "png":
		return "image/png"
	case "jpg", "jpeg":
		return "image/jpeg"
	case "webp":
		return "image/webp"
	case "heic":
		return "image/heic"
	case "heif":
		return "image/heif"
	case "gif":
		return "image/gif"
	case "pdf":
		return "application/pdf"
	case "txt":
		return "text/plain"
	case "md":
		return "text/markdown"
	case "html", "htm":
		return "text/html"
	case "csv":
		return "text/csv"
	case "xml":
		return "text/xml"
	case "wav":
		return "audio/wav"
	case "mp3":
		return "audio/mp3"
	case "aac":
		return "audio/aac"
	case "flac":
		return "audio/flac"
	case "ogg":
		return "audio/ogg"
	case "aiff", "aif":
		return "audio/aiff"
	case "mp4":
		return "video/mp4"
	case "mpeg", "mpg":
		return "video/mpeg"
	case "mov":
		return "video/mov"
	case "webm":
		return "video/webm"
	}
	return ""
}

// audio appends the inlineData part of an input_audio part.
func (c Chat) audio(w *contents, a gjson.Result, param string) error {
	var mime string
	switch f := a.Get("format").Str; strings.ToLower(f) {
	case "wav":
		mime = "audio/wav"
	case "mp3":
		mime = "audio/mp3"
	case "aac", "flac", "ogg", "aiff":
		mime = "audio/" + strings.ToLower(f)
	default:
		return c.unsupported(param+".format", "input_audio format "+strconv.Quote(f)+" is not supported")
	}
	data := a.Get("data")
	if data.Type != gjson.String || data.Str == "" {
		return providers.InvalidParam(param+".data", "input_audio needs base64 data")
	}
	w.inline(mime, data.Str)
	return nil
}

// file appends the inlineData part of a file part: its file_data as a data
// URL, or as plain base64 with the media type its filename's extension
// names. file_id refers to a file store Gemini does not share.
func (c Chat) file(w *contents, f gjson.Result, param string) error {
	fd := f.Get("file_data")
	if fd.Type != gjson.String || fd.Str == "" {
		if f.Get("file_id").Exists() {
			return c.unsupported(param+".file_id", "file_id is not supported; send the file as file_data")
		}
		return providers.InvalidParam(param+".file_data", "a file part needs file_data")
	}
	if mime, data, ok := dataURL(fd.Str); ok {
		w.inline(mime, data)
		return nil
	}
	mime := mimeByExtension(f.Get("filename").Str)
	if mime == "" {
		return providers.InvalidParam(param+".file_data",
			"file_data must be a data:<media type>;base64,<data> URL, or a filename must name a known file type")
	}
	w.inline(mime, fd.Str)
	return nil
}

// modelParts appends the parts of assistant message i: the thought parts
// of its signed thinking blocks, its text (carrying the signature of a
// thinking block without text), then a functionCall part per tool call with
// the signature its id carries. current says whether the message belongs to
// the turn a Gemini 3 model validates; there, the first function call of
// each model content that lost its signature gets Google's dummy one.
func (c Chat) modelParts(w *contents, m *message, i int, current bool) error {
	var textSig string
	m.ThinkingBlocks.ForEach(func(_, blk gjson.Result) bool {
		sig := blk.Get("signature")
		if blk.Get("type").Str != "thinking" || sig.Type != gjson.String || sig.Str == "" {
			return true
		}
		if th := blk.Get("thinking"); th.Type == gjson.String && th.Str != "" {
			w.text("model", th, true, sig.Raw)
		} else {
			textSig = sig.Raw
		}
		return true
	})

	if m.Content.Type == gjson.String {
		w.text("model", m.Content, false, textSig)
	} else {
		last := -1
		k := 0
		m.Content.ForEach(func(_, part gjson.Result) bool {
			if providers.PartText(part).Str != "" {
				last = k
			}
			k++
			return true
		})
		k = 0
		m.Content.ForEach(func(_, part gjson.Result) bool {
			if k == last {
				w.text("model", providers.PartText(part), false, textSig)
			} else {
				w.text("model", providers.PartText(part), false, "")
			}
			k++
			return true
		})
		if last < 0 {
			w.text("model", gjson.Result{}, false, textSig)
		}
	}

	var err error
	j := 0
	m.ToolCalls.ForEach(func(_, call gjson.Result) bool {
		fn := call.Get("function")
		args := strings.TrimSpace(fn.Get("arguments").Str)
		if args == "" {
			args = "{}"
		} else if args[0] != '{' || !providers.ValidJSON(unsafe.Slice(unsafe.StringData(args), len(args))) {
			err = providers.InvalidParam(
				"messages["+strconv.Itoa(i)+"].tool_calls["+strconv.Itoa(j)+"].function.arguments",
				"function.arguments must be a JSON object encoded as a string")
			return false
		}
		id, sig := splitCallID(call.Get("id").Str)
		w.part("model")
		if sig == "" && current && w.calls == 0 {
			sig = dummySignature
		}
		w.calls++
		p := w.w.Next().Object()
		fc := p.Object("functionCall")
		if id != "" {
			fc.Str("id", id)
		}
		fc.Text("name", jsonw.StrOf(fn.Get("name")))
		fc.Raw("args", args)
		fc.End()
		if sig != "" {
			p.Str("thoughtSignature", sig)
		}
		p.End()
		j++
		return true
	})
	return err
}

// toolResult appends the functionResponse part of tool message i, named
// after the function of the assistant tool call it answers.
func toolResult(w *contents, m *message, i int, names map[string]gjson.Result) error {
	full := m.ToolCallID.Str
	name, ok := names[full]
	if !ok || name.Type != gjson.String {
		return providers.InvalidParam("messages["+strconv.Itoa(i)+"].tool_call_id",
			"no earlier assistant message has a tool call with id %q", full)
	}
	id, _ := splitCallID(full)
	w.part("user")
	p := w.w.Next().Object()
	fr := p.Object("functionResponse")
	if id != "" {
		fr.Str("id", id)
	}
	fr.Raw("name", name.Raw)
	writeResponse(fr.Key("response"), m.Content)
	fr.End()
	p.End()
	return nil
}

// writeResponse writes a functionResponse's response, which must be an
// object: a tool result that is a JSON object goes as it is, anything else
// as {"result": …} (a JSON array as the array, other text as a string).
func writeResponse(v jsonw.Value, content gjson.Result) {
	text := content.Str
	raw := content.Raw
	if content.IsArray() {
		var sb strings.Builder
		content.ForEach(func(_, part gjson.Result) bool {
			sb.WriteString(providers.PartText(part).Str)
			return true
		})
		text, raw = sb.String(), ""
	}
	if t := strings.TrimSpace(text); t != "" && (t[0] == '{' || t[0] == '[') &&
		providers.ValidJSON(unsafe.Slice(unsafe.StringData(t), len(t))) {
		if t[0] == '{' {
			v.Raw(t)
			return
		}
		o := v.Object()
		o.Raw("result", t)
		o.End()
		return
	}
	o := v.Object()
	if raw != "" && content.Type == gjson.String {
		o.Raw("result", raw)
	} else {
		o.Str("result", text)
	}
	o.End()
}

// writeSystem writes systemInstruction, a text part for each system and
// developer message's text, in order; nothing when there is none.
func writeSystem(o jsonw.Object, msgs []message) {
	mark := o.Mark()
	si := o.Object("systemInstruction")
	parts := si.Array("parts")
	if providers.WriteSystemTexts(parts, msgs) == 0 {
		mark.Rewind()
		return
	}
	parts.End()
	si.End()
}
