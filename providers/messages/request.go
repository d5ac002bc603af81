package messages

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// request holds the top-level fields of a Messages request that the
// translation reads. The zero gjson.Result stands for an absent field.
type request struct {
	model, messages, system, maxTokens, stopSequences, temperature, topP gjson.Result
	stream, metadata, tools, toolChoice, thinking, outputConfig          gjson.Result
	outputFormat, cacheControl                                           gjson.Result
}

// set records one top-level field, or refuses one that the hub cannot
// express. Fields not listed are dropped (see ToChat).
func (r *request) set(key string, v gjson.Result) error {
	var field *gjson.Result
	switch key {
	case "model":
		field = &r.model
	case "messages":
		field = &r.messages
	case "system":
		field = &r.system
	case "max_tokens":
		field = &r.maxTokens
	case "stop_sequences":
		field = &r.stopSequences
	case "temperature":
		field = &r.temperature
	case "top_p":
		field = &r.topP
	case "stream":
		field = &r.stream
	case "metadata":
		field = &r.metadata
	case "tools":
		field = &r.tools
	case "tool_choice":
		field = &r.toolChoice
	case "thinking":
		field = &r.thinking
	case "output_config":
		field = &r.outputConfig
	case "output_format":
		field = &r.outputFormat
	case "cache_control":
		field = &r.cacheControl
	case "mcp_servers":
		if v.IsArray() && v.Get("#").Int() > 0 {
			return unsupported("mcp_servers", "the MCP connector (mcp_servers) runs on Anthropic's servers and is not available for this model's provider")
		}
	case "compaction":
		if v.Exists() && v.Type != gjson.Null {
			return unsupported("compaction", "compaction requests are served by Anthropic's servers only and are not available for this model's provider")
		}
	}
	if field != nil && !field.Exists() {
		*field = v // the first of duplicate keys, as gjson's Get reads
	}
	return nil
}

// ToChat translates a Messages request body, already checked by Validate
// or ValidateCountTokens, into a hub (Chat Completions) request body for
// the same model name.
//
// What maps:
//
//	system (string or text blocks)  a system message
//	messages                        user, assistant and tool messages (below)
//	max_tokens                      max_completion_tokens
//	stop_sequences                  stop
//	temperature, top_p              the same (both APIs call 1 the default)
//	stream                          stream, with stream_options.include_usage
//	                                always on, so that message_delta has usage
//	tools (custom, input_schema)    function tools (parameters, strict)
//	tool_choice                     auto, required, a function, none;
//	                                disable_parallel_tool_use → parallel_tool_calls false
//	thinking, output_config.effort  reasoning_effort (see reasoningEffort)
//	output_config.format,
//	output_format                   response_format json_schema
//	metadata.user_id                user
//	cache_control                   prompt_cache_retention: in_memory, or
//	                                24h for a ttl of 1h
//
// Prompt caching markers (cache_control) stay where the client put them,
// in the form the hub gives them to Anthropic, Claude on Bedrock and on
// Vertex (and other providers drop): on a tool, on a text, image or
// document part, on a tool message for a tool_result block, on a tool
// call for a tool_use block.
//
// In messages: text blocks become text (several text blocks one string,
// joined by a blank line, unless one carries cache_control: then text
// parts); image blocks image_url
// parts (base64 sources as data: URLs, url sources as URLs); PDF documents
// file parts with a data: URL; plain-text and content documents text;
// tool_use blocks tool_calls (input as the arguments string); tool_result
// blocks tool messages, before the rest of the user turn (is_error is said
// in the text; images and PDFs they hold follow in a user message, as tool
// messages carry only text); thinking blocks with a signature and
// redacted_thinking blocks the assistant's thinking_blocks, exactly, and
// the thinking text reasoning_content.
//
// Dropped: top_k (the hub has no equivalent), service_tier,
// context_management, container, inference_geo, speed, diagnostics,
// fallbacks, thinking.display, and any field this code does not know.
// Refused with a 400: server and Anthropic-defined tools (web search, code
// execution, bash, text editor, …), mcp_servers, compaction, blocks that
// only Anthropic's servers produce, file_id and URL document sources.
func ToChat(body []byte) ([]byte, error) {
	var r request
	err := providers.ReadMembers(body, r.set)
	if err != nil {
		return nil, err
	}

	w := jsonw.New(make([]byte, 0, len(body)+len(body)/8+128))
	o := w.Object()
	o.Text("model", jsonw.StrOf(r.model))
	msgs := o.Array("messages")
	var tr translator
	if err = tr.writeSystem(msgs, "system", r.system); err != nil {
		return nil, err
	}
	if err = tr.writeMessages(msgs, r.messages); err != nil {
		return nil, err
	}
	msgs.End()

	if mt := r.maxTokens; mt.Exists() {
		if mt.Type != gjson.Number || mt.Int() < 1 {
			return nil, unsupported("max_tokens", "max_tokens must be at least 1 for this model's provider")
		}
		o.Raw("max_completion_tokens", mt.Raw)
	}
	if err = writeStop(o, r.stopSequences); err != nil {
		return nil, err
	}
	for _, f := range [...]struct {
		name string
		v    gjson.Result
	}{{"temperature", r.temperature}, {"top_p", r.topP}} {
		switch f.v.Type {
		case gjson.Number:
			o.Raw(f.name, f.v.Raw)
		case gjson.Null:
		default:
			if f.v.Exists() {
				return nil, invalid(f.name, "%s must be a number", f.name)
			}
		}
	}
	if r.stream.Type == gjson.True {
		o.Bool("stream", true)
		so := o.Object("stream_options")
		so.Bool("include_usage", true)
		so.End()
	}

	haveTools := false
	if haveTools, err = writeTools(o, r.tools); err != nil {
		return nil, err
	}
	if err = writeToolChoice(o, r.toolChoice, haveTools); err != nil {
		return nil, err
	}
	effort, err := reasoningEffort(r.thinking, r.outputConfig)
	if err != nil {
		return nil, err
	}
	if effort != "" {
		o.Str("reasoning_effort", effort)
	}
	if err = writeResponseFormat(o, r.outputConfig, r.outputFormat); err != nil {
		return nil, err
	}
	if u := r.metadata.Get("user_id"); u.Type == gjson.String && u.Str != "" {
		o.Raw("user", u.Raw)
	}
	if cc := r.cacheControl; cc.IsObject() {
		if cc.Get("ttl").Str == "1h" {
			o.Str("prompt_cache_retention", "24h")
		} else {
			o.Str("prompt_cache_retention", "in_memory")
		}
	}
	o.End()
	return w.Finish()
}

// writeSystem writes the system message for Anthropic's top-level
// system: a string, or text blocks joined by a blank line.
func (t *translator) writeSystem(msgs jsonw.Array, param string, system gjson.Result) error {
	parts := &t.text
	parts.reset()
	switch {
	case !system.Exists() || system.Type == gjson.Null:
		return nil
	case system.Type == gjson.String:
		if system.Str == "" {
			return nil
		}
		parts.addText(system)
	case system.IsArray():
		var err error
		i := 0
		system.ForEach(func(_, block gjson.Result) bool {
			if block.Get("type").Str != "text" || block.Get("text").Type != gjson.String {
				err = invalid(param+"."+strconv.Itoa(i), "system blocks must be text blocks")
				return false
			}
			n := len(parts.items)
			parts.addText(block.Get("text"))
			parts.mark(n, block)
			i++
			return true
		})
		if err != nil {
			return err
		}
		if parts.empty() {
			return nil
		}
	default:
		return invalid(param, "system must be a string or an array of text blocks")
	}
	m := msgs.Object()
	m.Str("role", "system")
	parts.writeContent(m.Key("content"), false)
	m.End()
	return nil
}

// parts collects the content of one hub message: text, and rendered
// non-text parts (image_url, file) where the message may carry them.
type parts struct {
	items  []part
	texts  int
	cached bool // a part carries cache_control: the content is parts
}

// part is a text (a JSON string from the request, or a Go string the
// translation made) or a non-text content part: an image_url part of url,
// or a file part of filename and url (a data: URL).
type part struct {
	text gjson.Result
	lit  string

	// cache is the block's cache_control, which the part carries.
	cache gjson.Result

	kind     int // partText, partImage or partFile
	url      jsonw.Text
	filename string
}

// Kinds of part.
const (
	partText = iota
	partImage
	partFile
)

// nonText reports whether the part is an image or a file.
func (it *part) nonText() bool { return it.kind != partText }

// write writes a non-text part.
func (it *part) write(v jsonw.Value) {
	o := v.Object()
	defer func() {
		if it.cache.IsObject() {
			o.Compact("cache_control", it.cache.Raw)
		}
		o.End()
	}()
	switch it.kind {
	case partImage:
		o.Str("type", "image_url")
		iu := o.Object("image_url")
		iu.Text("url", it.url)
		iu.End()
	case partFile:
		o.Str("type", "file")
		f := o.Object("file")
		f.Str("filename", it.filename)
		f.Text("file_data", it.url)
		f.End()
	}
}

func (p *parts) empty() bool { return len(p.items) == 0 }

// mark gives the last part a block added (from index n on) the block's
// cache_control, if it has one.
func (p *parts) mark(n int, block gjson.Result) {
	if cc := block.Get("cache_control"); cc.IsObject() && len(p.items) > n {
		p.items[len(p.items)-1].cache = cc
		p.cached = true
	}
}

// addText adds a text; empty texts are left out, as Anthropic refuses
// empty text blocks and they say nothing.
func (p *parts) addText(v gjson.Result) {
	if v.Type == gjson.String && v.Str != "" {
		p.items = append(p.items, part{text: v})
		p.texts++
	}
}

func (p *parts) addLiteral(s string) {
	if s != "" {
		p.items = append(p.items, part{lit: s})
		p.texts++
	}
}

func (p *parts) addPart(it part) { p.items = append(p.items, it) }

func (p *parts) reset() {
	p.items = p.items[:0]
	p.texts = 0
	p.cached = false
}

func (it *part) str() string {
	if it.text.Exists() {
		return it.text.Str
	}
	return it.lit
}

// textSep joins the text blocks of one message: they are separate
// paragraphs to the model.
const textSep = "\n\n"

// writeContent writes the message's content: one string when it is only
// text (the form every provider takes), else an array of parts. With
// nullIfEmpty an empty content is null (an assistant message with tool
// calls), else "".
func (p *parts) writeContent(v jsonw.Value, nullIfEmpty bool) {
	switch {
	case len(p.items) == 0 && nullIfEmpty:
		v.Null()
		return
	case len(p.items) == 0:
		v.Str("")
		return
	case p.texts == len(p.items) && !p.cached:
		if len(p.items) == 1 && p.items[0].text.Exists() {
			v.Raw(p.items[0].text.Raw)
			return
		}
		var sb strings.Builder
		for i := range p.items {
			if i > 0 {
				sb.WriteString(textSep)
			}
			sb.WriteString(p.items[i].str())
		}
		v.Str(sb.String())
		return
	}
	a := v.Array()
	for i := range p.items {
		it := &p.items[i]
		switch {
		case it.nonText():
			it.write(a.Value())
		default:
			o := a.Object()
			o.Str("type", "text")
			if it.text.Exists() {
				o.Raw("text", it.text.Raw)
			} else {
				o.Str("text", it.lit)
			}
			if it.cache.IsObject() {
				o.Compact("cache_control", it.cache.Raw)
			}
			o.End()
		}
	}
	a.End()
}

// translator holds scratch space reused across the messages of a request.
type translator struct {
	user, attached, tool, doc, text parts
	reasoning                       []gjson.Result
	thinking, calls                 jsonw.List
}

// writeMessages writes the hub messages for Anthropic's messages.
func (t *translator) writeMessages(msgs jsonw.Array, list gjson.Result) error {
	var err error
	i := 0
	list.ForEach(func(_, m gjson.Result) bool {
		p := "messages." + strconv.Itoa(i)
		content := m.Get("content")
		switch m.Get("role").Str {
		case "assistant":
			err = t.writeAssistant(msgs, p, content)
		case "system":
			err = t.writeSystem(msgs, p+".content", content)
		default:
			err = t.writeUser(msgs, p, content)
		}
		i++
		return err == nil
	})
	return err
}

// writeUser writes the hub messages for one user turn: a tool message per
// tool_result block, in order, then a user message with the rest (first
// what the tool results held that a tool message cannot, then the turn's
// own blocks).
func (t *translator) writeUser(msgs jsonw.Array, p string, content gjson.Result) error {
	if content.Type == gjson.String {
		m := msgs.Object()
		m.Str("role", "user")
		m.Raw("content", content.Raw)
		m.End()
		return nil
	}
	t.user.reset()
	t.attached.reset()
	var err error
	j := 0
	results := 0
	content.ForEach(func(_, block gjson.Result) bool {
		bp := p + ".content." + strconv.Itoa(j)
		j++
		if block.Get("type").Str == "tool_result" {
			results++
			err = t.writeToolResult(msgs, bp, block)
		} else {
			n := len(t.user.items)
			err = t.addUserBlock(&t.user, bp, block)
			t.user.mark(n, block)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if t.attached.empty() && t.user.empty() && results > 0 {
		return nil
	}
	// An empty turn (no blocks, or only empty text) stays an empty turn.
	t.attached.items = append(t.attached.items, t.user.items...)
	t.attached.texts += t.user.texts
	t.attached.cached = t.attached.cached || t.user.cached
	m := msgs.Object()
	m.Str("role", "user")
	t.attached.writeContent(m.Key("content"), false)
	m.End()
	return nil
}

// addUserBlock adds one content block of a user turn (or of a tool
// result's content, or of a content document) to ps.
func (t *translator) addUserBlock(ps *parts, p string, block gjson.Result) error {
	switch typ := block.Get("type").Str; typ {
	case "text":
		text := block.Get("text")
		if text.Type != gjson.String {
			return invalid(p+".text", "Field required")
		}
		ps.addText(text)
	case "image":
		it, err := imagePart(p, block.Get("source"))
		if err != nil {
			return err
		}
		ps.addPart(it)
	case "document":
		return t.addDocument(ps, p, block)
	case "search_result":
		return addSearchResult(ps, p, block)
	case "tool_use", "thinking", "redacted_thinking":
		return invalid(p+".type", "%s blocks belong in assistant messages", typ)
	default:
		return refusedBlock(p, typ)
	}
	return nil
}

// refusedBlock is the error for a block type the hub cannot carry.
func refusedBlock(p, typ string) error {
	switch typ {
	case "server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
		"bash_code_execution_tool_result", "text_editor_code_execution_tool_result", "tool_search_tool_result",
		"mcp_tool_use", "mcp_tool_result", "container_upload", "compaction", "tool_reference":
		return unsupported(p+".type", "%s blocks come from Anthropic's server tools, which this model's provider does not have", typ)
	}
	return unsupported(p+".type", "content blocks of type %q are not supported for this model's provider", typ)
}

// imagePart is an image block's source as an image_url part.
func imagePart(p string, src gjson.Result) (part, error) {
	it := part{kind: partImage}
	switch src.Get("type").Str {
	case "base64":
		media, data := src.Get("media_type"), src.Get("data")
		if media.Type != gjson.String || media.Str == "" || data.Type != gjson.String {
			return it, invalid(p+".source", "a base64 image source needs media_type and data")
		}
		if !jsonSafe(media.Str) {
			return it, invalid(p+".source.media_type", "%q is not a media type", media.Str)
		}
		// data's raw form is already escaped: it goes as it is.
		it.url = jsonw.Lit(data.Raw).Prefixed("data:" + media.Str + ";base64,")
	case "url":
		u := src.Get("url")
		if u.Type != gjson.String || u.Str == "" {
			return it, invalid(p+".source.url", "Field required")
		}
		it.url = jsonw.Lit(u.Raw)
	case "file":
		return it, unsupported(p+".source", "image sources of type file (Anthropic's Files API) are not available for this model's provider; send the image as base64 or a URL")
	default:
		return it, invalid(p+".source.type", "an image source must be of type base64 or url")
	}
	return it, nil
}

// jsonSafe reports whether s needs no escaping in a JSON string.
func jsonSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// addDocument adds a document block: a PDF as a file part with a data:
// URL (OpenAI's form, which the hub carries; a provider that takes no
// PDFs refuses it), a plain-text or content document as its text.
func (t *translator) addDocument(ps *parts, p string, block gjson.Result) error {
	src := block.Get("source")
	title := block.Get("title")
	switch src.Get("type").Str {
	case "base64":
		media, data := src.Get("media_type").Str, src.Get("data")
		if media != "application/pdf" {
			return unsupported(p+".source.media_type", "base64 documents must be application/pdf")
		}
		if data.Type != gjson.String {
			return invalid(p+".source.data", "Field required")
		}
		name := "document.pdf"
		if title.Type == gjson.String && title.Str != "" {
			name = title.Str
		}
		ps.addPart(part{kind: partFile, filename: name, url: jsonw.Lit(data.Raw).Prefixed("data:application/pdf;base64,")})
	case "text":
		data := src.Get("data")
		if data.Type != gjson.String {
			return invalid(p+".source.data", "Field required")
		}
		if title.Type == gjson.String && title.Str != "" {
			ps.addLiteral(title.Str + textSep + data.Str)
		} else {
			ps.addText(data)
		}
	case "content":
		c := src.Get("content")
		if c.Type == gjson.String {
			ps.addText(c)
			break
		}
		var err error
		k := 0
		c.ForEach(func(_, inner gjson.Result) bool {
			ip := p + ".source.content." + strconv.Itoa(k)
			k++
			switch inner.Get("type").Str {
			case "text", "image":
				err = t.addUserBlock(ps, ip, inner)
			default:
				err = invalid(ip+".type", "a content document holds text and image blocks")
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	case "url":
		return unsupported(p+".source", "document sources of type url are not available for this model's provider; send the PDF as base64")
	case "file":
		return unsupported(p+".source", "document sources of type file (Anthropic's Files API) are not available for this model's provider; send the PDF as base64")
	default:
		return invalid(p+".source.type", "a document source must be of type base64, text, content, url or file")
	}
	if ctx := block.Get("context"); ctx.Type == gjson.String {
		ps.addText(ctx)
	}
	return nil
}

// addSearchResult adds a search_result block as text: its title, source
// and text content.
func addSearchResult(ps *parts, p string, block gjson.Result) error {
	var sb strings.Builder
	if t := block.Get("title").Str; t != "" {
		sb.WriteString(t)
		sb.WriteByte('\n')
	}
	if s := block.Get("source").Str; s != "" {
		sb.WriteString(s)
		sb.WriteByte('\n')
	}
	var err error
	block.Get("content").ForEach(func(_, c gjson.Result) bool {
		if c.Get("type").Str != "text" {
			err = invalid(p+".content", "a search result holds text blocks")
			return false
		}
		sb.WriteByte('\n')
		sb.WriteString(c.Get("text").Str)
		return true
	})
	if err != nil {
		return err
	}
	ps.addLiteral(strings.TrimSpace(sb.String()))
	return nil
}

// writeToolResult writes a tool message for a tool_result block. What a
// tool message cannot carry (images, PDFs) goes to t.attached, for the user
// message that follows, and the tool message says so.
func (t *translator) writeToolResult(msgs jsonw.Array, p string, block gjson.Result) error {
	id := block.Get("tool_use_id")
	if id.Type != gjson.String || id.Str == "" {
		return invalid(p+".tool_use_id", "Field required")
	}
	t.tool.reset()
	attached := 0
	switch c := block.Get("content"); {
	case c.Type == gjson.String:
		t.tool.addText(c)
	case c.IsArray():
		var err error
		k := 0
		c.ForEach(func(_, inner gjson.Result) bool {
			ip := p + ".content." + strconv.Itoa(k)
			k++
			switch inner.Get("type").Str {
			case "text", "search_result":
				err = t.addUserBlock(&t.tool, ip, inner)
			case "image", "document":
				// Text (of a plain-text document) stays with the result;
				// images and PDFs move to the user message.
				t.doc.reset()
				if err = t.addUserBlock(&t.doc, ip, inner); err != nil {
					return false
				}
				for _, it := range t.doc.items {
					if it.nonText() {
						t.attached.addPart(it)
						attached++
					} else {
						t.tool.items = append(t.tool.items, it)
						t.tool.texts++
					}
				}
			default:
				err = refusedBlock(ip, inner.Get("type").Str)
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	case c.Exists() && c.Type != gjson.Null:
		return invalid(p+".content", "content must be a string or an array of content blocks")
	}
	if block.Get("is_error").Type == gjson.True {
		// Tool messages have no error flag: the text says it.
		if t.tool.empty() {
			t.tool.addLiteral("Error")
		} else {
			first := &t.tool.items[0]
			first.lit, first.text = "Error: "+first.str(), gjson.Result{}
		}
	}
	switch {
	case attached == 1:
		t.tool.addLiteral("(The tool returned an image or document; it follows in the next user message.)")
	case attached > 1:
		t.tool.addLiteral("(The tool returned " + strconv.Itoa(attached) + " images or documents; they follow in the next user message.)")
	}
	m := msgs.Object()
	m.Str("role", "tool")
	m.Raw("tool_call_id", id.Raw)
	t.tool.writeContent(m.Key("content"), false)
	if cc := block.Get("cache_control"); cc.IsObject() {
		m.Compact("cache_control", cc.Raw)
	}
	m.End()
	return nil
}

// writeAssistant writes the hub assistant message for an assistant turn:
// its text as content, its thinking as reasoning_content and (signed or
// redacted blocks, exactly, in order) thinking_blocks, its tool_use blocks
// as tool_calls.
func (t *translator) writeAssistant(msgs jsonw.Array, p string, content gjson.Result) error {
	m := msgs.Object()
	m.Str("role", "assistant")
	if content.Type == gjson.String {
		m.Raw("content", content.Raw)
		m.End()
		return nil
	}
	text := &t.text
	text.reset()
	reasoning := t.reasoning[:0]
	defer func() { t.reasoning = reasoning }()
	t.thinking.Reset()
	t.calls.Reset()
	var err error
	j := 0
	content.ForEach(func(_, block gjson.Result) bool {
		bp := p + ".content." + strconv.Itoa(j)
		j++
		switch typ := block.Get("type").Str; typ {
		case "text":
			t := block.Get("text")
			if t.Type != gjson.String {
				err = invalid(bp+".text", "Field required")
				return false
			}
			n := len(text.items)
			text.addText(t)
			text.mark(n, block)
		case "thinking":
			th, sig := block.Get("thinking"), block.Get("signature")
			if th.Type != gjson.String {
				err = invalid(bp+".thinking", "Field required")
				return false
			}
			if th.Str != "" {
				reasoning = append(reasoning, th)
			}
			if sig.Type == gjson.String && sig.Str != "" {
				t.thinking.Grow(48 + len(th.Raw) + len(sig.Raw))
				w := t.thinking.Begin()
				o := w.Object()
				o.Str("type", "thinking")
				o.Raw("thinking", th.Raw)
				o.Raw("signature", sig.Raw)
				o.End()
				err = t.thinking.End(&w)
			}
		case "redacted_thinking":
			data := block.Get("data")
			if data.Type != gjson.String {
				err = invalid(bp+".data", "Field required")
				return false
			}
			t.thinking.Grow(48 + len(data.Raw))
			w := t.thinking.Begin()
			o := w.Object()
			o.Str("type", "redacted_thinking")
			o.Raw("data", data.Raw)
			o.End()
			err = t.thinking.End(&w)
		case "tool_use":
			err = addToolCall(&t.calls, bp, block)
		case "image", "document", "tool_result", "search_result":
			err = invalid(bp+".type", "%s blocks belong in user messages", typ)
		default:
			err = refusedBlock(bp, typ)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	nCalls := t.calls.Len()
	if nCalls == 0 && text.empty() && len(reasoning) == 0 && t.thinking.Len() == 0 {
		m.Str("content", "")
		m.End()
		return nil
	}
	text.writeContent(m.Key("content"), nCalls > 0)
	switch len(reasoning) {
	case 0:
	case 1:
		m.Raw("reasoning_content", reasoning[0].Raw)
	default:
		var sb strings.Builder
		for i, r := range reasoning {
			if i > 0 {
				sb.WriteString(textSep)
			}
			sb.WriteString(r.Str)
		}
		m.Str("reasoning_content", sb.String())
	}
	if t.thinking.Len() > 0 {
		a := m.Array("thinking_blocks")
		a.List(&t.thinking)
		a.End()
	}
	if nCalls > 0 {
		a := m.Array("tool_calls")
		a.List(&t.calls)
		a.End()
	}
	m.End()
	return nil
}

// addToolCall adds to calls a hub tool call for a tool_use block.
func addToolCall(calls *jsonw.List, p string, block gjson.Result) error {
	id, name, input := block.Get("id"), block.Get("name"), block.Get("input")
	if id.Type != gjson.String || id.Str == "" {
		return invalid(p+".id", "Field required")
	}
	if name.Type != gjson.String || name.Str == "" {
		return invalid(p+".name", "Field required")
	}
	if input.Exists() && !input.IsObject() {
		return invalid(p+".input", "input must be an object")
	}
	calls.Grow(64 + len(id.Raw) + len(name.Raw) + len(input.Raw))
	w := calls.Begin()
	o := w.Object()
	o.Raw("id", id.Raw)
	o.Str("type", "function")
	fn := o.Object("function")
	fn.Raw("name", name.Raw)
	if input.Exists() {
		fn.Str("arguments", providers.CompactJSON(input.Raw))
	} else {
		fn.Str("arguments", "{}")
	}
	fn.End()
	if cc := block.Get("cache_control"); cc.IsObject() {
		o.Compact("cache_control", cc.Raw)
	}
	o.End()
	return calls.End(&w)
}

// writeStop writes stop for stop_sequences; empty sequences are left out.
func writeStop(o jsonw.Object, stop gjson.Result) error {
	if !stop.Exists() || stop.Type == gjson.Null {
		return nil
	}
	if !stop.IsArray() {
		return invalid("stop_sequences", "stop_sequences must be an array of strings")
	}
	mark := o.Mark()
	a := o.Array("stop")
	n := 0
	var err error
	stop.ForEach(func(_, s gjson.Result) bool {
		if s.Type != gjson.String {
			err = invalid("stop_sequences", "stop_sequences must be an array of strings")
			return false
		}
		if s.Str != "" {
			n++
			a.Raw(s.Raw)
		}
		return true
	})
	if err != nil {
		return err
	}
	if n == 0 {
		mark.Rewind()
		return nil
	}
	a.End()
	return nil
}

// writeTools writes function tools for Anthropic's custom tools and
// reports whether there were any. Anthropic's server tools (web search,
// code execution, …) and Anthropic-defined client tools (bash, text
// editor, computer use, memory), which have no input_schema the hub could
// send, are refused.
func writeTools(o jsonw.Object, tools gjson.Result) (bool, error) {
	if !tools.Exists() || tools.Type == gjson.Null {
		return false, nil
	}
	if !tools.IsArray() {
		return false, invalid("tools", "tools must be an array")
	}
	mark := o.Mark()
	list := o.Array("tools")
	n := 0
	var err error
	i := 0
	tools.ForEach(func(_, t gjson.Result) bool {
		p := "tools." + strconv.Itoa(i)
		i++
		if !t.IsObject() {
			err = invalid(p, "each tool must be an object")
			return false
		}
		if typ := t.Get("type"); typ.Exists() && typ.Type != gjson.Null && typ.Str != "custom" {
			err = unsupported(p+".type", "tools of type %q run on Anthropic's servers or need Anthropic's built-in schema, which this model's provider does not have; define it as a custom tool with an input_schema", typ.Str)
			return false
		}
		name, schema := t.Get("name"), t.Get("input_schema")
		if name.Type != gjson.String || name.Str == "" {
			err = invalid(p+".name", "Field required")
			return false
		}
		if !schema.IsObject() {
			err = invalid(p+".input_schema", "input_schema must be a JSON Schema object")
			return false
		}
		n++
		tool := list.Object()
		tool.Str("type", "function")
		fn := tool.Object("function")
		fn.Raw("name", name.Raw)
		if d := t.Get("description"); d.Type == gjson.String && d.Str != "" {
			fn.Raw("description", d.Raw)
		}
		fn.Raw("parameters", schema.Raw)
		if s := t.Get("strict"); s.Type == gjson.True || s.Type == gjson.False {
			fn.Raw("strict", s.Raw)
		}
		fn.End()
		if cc := t.Get("cache_control"); cc.IsObject() {
			tool.Compact("cache_control", cc.Raw)
		}
		tool.End()
		return true
	})
	if err != nil {
		return false, err
	}
	if n == 0 {
		mark.Rewind()
		return false, nil
	}
	list.End()
	return true, nil
}

// writeToolChoice writes tool_choice and parallel_tool_calls. Without
// tools, auto and none say nothing (and the hub refuses tool_choice
// without tools); any and tool are the client's error.
func writeToolChoice(o jsonw.Object, tc gjson.Result, haveTools bool) error {
	if !tc.Exists() || tc.Type == gjson.Null {
		return nil
	}
	if !tc.IsObject() {
		return invalid("tool_choice", "tool_choice must be an object")
	}
	typ := tc.Get("type").Str
	switch typ {
	case "auto", "any", "tool", "none":
	default:
		return invalid("tool_choice.type", "tool_choice.type must be auto, any, tool or none")
	}
	if !haveTools {
		if typ == "any" || typ == "tool" {
			return invalid("tool_choice", "tool_choice of type %s needs tools", typ)
		}
		return nil
	}
	switch typ {
	case "auto":
		o.Str("tool_choice", "auto")
	case "any":
		o.Str("tool_choice", "required")
	case "none":
		o.Str("tool_choice", "none")
		return nil
	case "tool":
		name := tc.Get("name")
		if name.Type != gjson.String || name.Str == "" {
			return invalid("tool_choice.name", "Field required")
		}
		c := o.Object("tool_choice")
		c.Str("type", "function")
		fn := c.Object("function")
		fn.Raw("name", name.Raw)
		fn.End()
		c.End()
	}
	if tc.Get("disable_parallel_tool_use").Type == gjson.True {
		o.Bool("parallel_tool_calls", false)
	}
	return nil
}

// reasoningEffort maps Anthropic's thinking configuration to the hub's
// reasoning_effort, by the inverse of the budgets LiteLLM's forward map uses
// (minimal 128, low 1024, medium 2048, high 4096 budget tokens), so that each
// of those budgets comes back as its effort:
//
//	thinking enabled, budget_tokens < 1024   minimal
//	                  1024 … 2047            low
//	                  2048 … 4095            medium
//	                  4096 and more          high
//	thinking adaptive                        output_config.effort, else none given
//	output_config.effort low, medium, high   the same; xhigh and max → high
//	thinking disabled or absent              none given (the provider's default)
//
// output_config.effort wins over a budget when both are given. Disabled
// thinking sends no reasoning_effort rather than "none", which many
// reasoning models refuse; a provider that thinks by default keeps doing so.
func reasoningEffort(thinking, outputConfig gjson.Result) (string, error) {
	typ := ""
	if thinking.Exists() && thinking.Type != gjson.Null {
		if !thinking.IsObject() {
			return "", invalid("thinking", "thinking must be an object")
		}
		typ = thinking.Get("type").Str
		switch typ {
		case "enabled", "adaptive", "disabled":
		default:
			return "", invalid("thinking.type", "thinking.type must be enabled, adaptive or disabled")
		}
	}
	if typ == "disabled" {
		return "", nil
	}
	switch e := outputConfig.Get("effort"); {
	case !e.Exists() || e.Type == gjson.Null:
	case e.Str == "low", e.Str == "medium", e.Str == "high":
		return e.Str, nil
	case e.Str == "xhigh", e.Str == "max":
		return "high", nil
	default:
		return "", invalid("output_config.effort", "output_config.effort must be low, medium, high, xhigh or max")
	}
	if typ != "enabled" {
		return "", nil
	}
	budget := thinking.Get("budget_tokens")
	if !providers.IsInt(budget) {
		return "", invalid("thinking.budget_tokens", "Field required")
	}
	switch n := budget.Int(); {
	case n < 1024:
		return "minimal", nil
	case n < 2048:
		return "low", nil
	case n < 4096:
		return "medium", nil
	default:
		return "high", nil
	}
}

// writeResponseFormat writes response_format for structured outputs:
// output_config.format (GA) or the older beta output_format, both
// {type:"json_schema", schema}. The hub's json_schema needs a name;
// "output" is given. strict is left out: Anthropic's schemas may have
// optional properties, which OpenAI's strict mode refuses.
func writeResponseFormat(o jsonw.Object, outputConfig, outputFormat gjson.Result) error {
	param := "output_config.format"
	f := outputConfig.Get("format")
	if !f.Exists() || f.Type == gjson.Null {
		param, f = "output_format", outputFormat
	}
	if !f.Exists() || f.Type == gjson.Null {
		return nil
	}
	if !f.IsObject() || f.Get("type").Str != "json_schema" {
		return invalid(param+".type", "the output format must be of type json_schema")
	}
	schema := f.Get("schema")
	if !schema.IsObject() {
		return invalid(param+".schema", "Field required")
	}
	rf := o.Object("response_format")
	rf.Str("type", "json_schema")
	js := rf.Object("json_schema")
	js.Str("name", "output")
	js.Raw("schema", schema.Raw)
	js.End()
	rf.End()
	return nil
}
