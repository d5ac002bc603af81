package bedrock

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// request holds the unified request fields the translation reads. The zero
// gjson.Result stands for an absent field.
type request struct {
	messages, maxTokens, maxCompletionTokens, stop, temperature, topP, stream gjson.Result
	tools, toolChoice, responseFormat, reasoningEffort, metadata, serviceTier gjson.Result
}

// set records one top-level field of the unified request, or rejects it
// when Converse cannot express it. Fields not listed are dropped.
func (r *request) set(key string, v gjson.Result) error {
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
	case "stream":
		r.stream = v
	case "tools":
		r.tools = v
	case "tool_choice":
		r.toolChoice = v
	case "response_format":
		r.responseFormat = v
	case "reasoning_effort":
		r.reasoningEffort = v
	case "metadata":
		r.metadata = v
	case "service_tier":
		r.serviceTier = v
	case "n":
		if v.Type == gjson.Number && v.Int() > 1 {
			return providers.Unsupported("n", providerName)
		}
	case "logprobs":
		if v.Type == gjson.True {
			return providers.Unsupported("logprobs", providerName)
		}
	default:
		return providers.NoEquivalent(key, v, providerName)
	}
	return nil
}

// ChatRequest translates a unified chat request, already checked by
// providers.ValidateChat, into a Converse request for model (a model id,
// an inference profile id such as "us.anthropic.claude-…", or an ARN), or a
// ConverseStream request when the body asks for a stream.
//
// System and developer messages become the top-level system blocks; tool
// results become toolResult blocks in user turns; consecutive messages of
// the same resulting role merge into one turn. Features Converse lacks (n >
// 1, logprobs, audio output, web search, http image URLs, file ids, custom
// tools) are rejected with a 400; parameters without an equivalent (seed,
// penalties, logit_bias, store, user, …) are dropped.
func (c Chat) ChatRequest(body []byte, model string) (providers.Request, error) {
	var req providers.Request
	var r request
	err := providers.ReadMembers(body, r.set)
	if err != nil {
		return req, err
	}

	stream := r.stream.Type == gjson.True
	if req.Path, err = Path(model, stream); err != nil {
		return req, err
	}
	if stream {
		req.Header = http.Header{"Accept": {EventStreamContentType}}
		req.Framing = EventStream
	} else {
		req.Header = http.Header{"Accept": {"application/json"}}
	}

	fam := baseFamily(c.BaseModels, model)
	maxTokens := int64(0)
	switch {
	case r.maxCompletionTokens.Type == gjson.Number:
		maxTokens = r.maxCompletionTokens.Int()
	case r.maxTokens.Type == gjson.Number:
		maxTokens = r.maxTokens.Int()
	}
	think, err := planReasoning(fam, r.reasoningEffort, &maxTokens)
	if err != nil {
		return req, err
	}
	format, err := c.planFormat(r.responseFormat)
	if err != nil {
		return req, err
	}

	var stack [16]message
	msgs := providers.AppendChatMessages(stack[:0], r.messages)
	var hist history
	// Signed reasoning is Claude's: other families never gave any, so a
	// thinking block in their history comes from another provider and
	// would be refused.
	t := turns{w: jsonw.New(make([]byte, 0, len(body)+256)), keepThinking: fam.provider == "anthropic" || fam.provider == "",
		caching: cachesPrompts(fam)}
	o := t.w.Object()
	if err = t.messages(o, msgs, &hist); err != nil {
		return req, err
	}
	writeSystem(o, msgs, t.caching)
	writeInference(o, maxTokens, r.temperature, r.topP, r.stop)
	if err = writeToolConfig(o, r.tools, r.toolChoice, &format, &hist, t.caching); err != nil {
		return req, err
	}
	think.write(o)
	writeOutputConfig(o, &format, think.effort)
	writeServiceTier(o, r.serviceTier)
	writeRequestMetadata(o, r.metadata)

	o.End()
	req.Body, err = t.w.Finish()
	return req, err
}

// message is a unified message as the translation reads it.
type message = providers.ChatMessage

// history is what the messages tell the tool configuration: whether they
// hold toolUse or toolResult blocks (Converse then requires a toolConfig)
// and the names of the tools called.
type history struct {
	toolBlocks bool
	toolNames  []string
}

func (h *history) addName(name string) {
	for _, n := range h.toolNames {
		if n == name {
			return
		}
	}
	h.toolNames = append(h.toolNames, name)
}

// turns writes "messages": it opens a turn when the first block of a role
// comes and merges the blocks of consecutive messages of one role, so
// Converse's alternation of user and assistant holds. Messages that give no
// block (empty text) do not open a turn.
type turns struct {
	w      jsonw.Writer // in the messages array
	role   string       // role of the open turn, "" before the first
	blocks int          // blocks in the open turn
	n      int          // turns written
	docs   []string

	// keepThinking restores assistant messages' thinking_blocks.
	keepThinking bool

	// caching turns cache_control markers into cache points: the model
	// family caches prompts (Claude, Nova, or a family the id does not
	// say).
	caching bool
}

// block opens the next block of a turn of role, opening the turn when it
// is not open.
func (t *turns) block(role string) jsonw.Object {
	if t.role != role {
		if t.role != "" {
			t.w.CloseArray()
			t.w.CloseObject()
		}
		t.n++
		t.role = role
		t.blocks = 0
		t.w.OpenObject()
		t.w.Key("role")
		t.w.Str(role)
		t.w.Key("content")
		t.w.OpenArray()
	}
	t.blocks++
	return t.w.Next().Object()
}

// messages writes "messages":[…] for every non-system message into o,
// the body, whose writer is t's.
func (t *turns) messages(o jsonw.Object, msgs []message, hist *history) error {
	o.Key("messages")
	t.w.OpenArray()
	for i := range msgs {
		m := &msgs[i]
		var err error
		switch m.Role {
		case "user":
			err = t.userBlocks(m, i)
		case "assistant":
			err = t.assistantBlocks(m, i, hist)
		case "tool":
			t.toolResult(m, hist)
		}
		if err != nil {
			return err
		}
	}
	if t.role != "" {
		t.w.CloseArray()
		t.w.CloseObject()
	}
	t.w.CloseArray()
	return nil
}

// text appends a text block for the JSON string v of a message of role,
// unless it is empty: Converse rejects blank text blocks. A cache_control
// marker, cache, puts a cache point after it.
func (t *turns) text(role string, v, cache gjson.Result) {
	if v.Type != gjson.String || v.Str == "" {
		return
	}
	b := t.block(role)
	b.Raw("text", v.Raw)
	b.End()
	t.cachePoint(role, cache)
}

// texts appends text blocks for content that is a string or an array of
// text (or refusal) parts, with the cache points their cache_control (and
// the message's, cache, for its last) ask for.
func (t *turns) texts(role string, content, cache gjson.Result) {
	if content.Type == gjson.String {
		t.text(role, content, cache)
		return
	}
	n, j := len(content.Array()), 0
	content.ForEach(func(_, part gjson.Result) bool {
		j++
		t.text(role, providers.PartText(part), partCache(part, cache, j == n))
		return true
	})
}

// partCache is the cache_control of a content part: its own, or for the
// last part of a message, the message's (msg), which marks the message's
// last block.
func partCache(part, msg gjson.Result, last bool) gjson.Result {
	if c := part.Get("cache_control"); c.IsObject() || !last {
		return c
	}
	return msg
}

// cachesPrompts reports whether a model family takes cache points:
// Claude and Nova do, and a model the id does not name (an application
// inference profile's ARN) may.
func cachesPrompts(fam family) bool {
	return fam.provider == "anthropic" || fam.provider == "amazon" && strings.HasPrefix(fam.name, "nova") || fam.provider == ""
}

// cachePoint appends a cachePoint block after the block before it, for a
// cache_control marker cache (Anthropic's {"type":"ephemeral", "ttl"?},
// as clients mark prompts for Claude): the prompt up to there is cached,
// for the ttl the marker gives ("5m" or "1h"; default five minutes).
// Nothing is written for a family that does not cache prompts, or without
// a marker.
func (t *turns) cachePoint(role string, cache gjson.Result) {
	if !t.caching || !cache.IsObject() {
		return
	}
	writeCachePoint(t.block(role), cache)
}

// writeCachePoint writes the member cachePoint of o, a block of content,
// system or tools, for the marker cache, and closes o.
func writeCachePoint(o jsonw.Object, cache gjson.Result) {
	cp := o.Object("cachePoint")
	cp.Str("type", "default")
	if ttl := cache.Get("ttl"); ttl.Str == "5m" || ttl.Str == "1h" {
		cp.Raw("ttl", ttl.Raw)
	}
	cp.End()
	o.End()
}

func partParam(i, j int) string {
	return "messages[" + strconv.Itoa(i) + "].content[" + strconv.Itoa(j) + "]"
}

// userBlocks appends the blocks of user message i.
func (t *turns) userBlocks(m *message, i int) error {
	if m.Content.Type == gjson.String {
		t.text("user", m.Content, m.CacheControl)
		return nil
	}
	var err error
	j := 0
	n := len(m.Content.Array())
	m.Content.ForEach(func(_, part gjson.Result) bool {
		cache := partCache(part, m.CacheControl, j == n-1)
		switch part.Get("type").Str {
		case "image_url":
			err = t.image(part.Get("image_url.url").Str, partParam(i, j)+".image_url.url")
		case "input_audio":
			err = t.audio(part.Get("input_audio"), partParam(i, j)+".input_audio")
		case "file":
			err = t.document(part.Get("file"), partParam(i, j)+".file")
		default: // text, refusal
			t.text("user", providers.PartText(part), cache)
			cache = gjson.Result{} // text writes its own point, after a block it wrote
		}
		if err == nil {
			t.cachePoint("user", cache)
		}
		j++
		return err == nil
	})
	return err
}

// image appends an image block: base64 bytes for a data: URL, an
// s3Location for an s3:// URL. Bedrock fetches no http(s) URLs.
func (t *turns) image(u, param string) error {
	switch {
	case hasPrefixFold(u, "data:"):
		media, data, err := parseDataURL(u, param)
		if err != nil {
			return err
		}
		format := imageFormat(media)
		if format == "" {
			return providers.InvalidParam(param,
				"Bedrock takes png, jpeg, gif and webp images, not %s", media)
		}
		b := t.block("user")
		img := b.Object("image")
		img.Str("format", format)
		src := img.Object("source")
		src.Str("bytes", data)
		src.End()
		img.End()
		b.End()
	case hasPrefixFold(u, "s3://"):
		format := imageFormat(mediaByExtension(u))
		if format == "" {
			return providers.InvalidParam(param,
				"an s3:// image URL must end in .png, .jpg, .jpeg, .gif or .webp")
		}
		b := t.block("user")
		img := b.Object("image")
		img.Str("format", format)
		src := img.Object("source")
		loc := src.Object("s3Location")
		loc.Str("uri", u)
		loc.End()
		src.End()
		img.End()
		b.End()
	case hasPrefixFold(u, "http://"), hasPrefixFold(u, "https://"):
		return providers.UnsupportedBecause(param, "image URLs are not supported by provider type "+providerName+
			": Bedrock cannot fetch images; send the image as a data: URL (base64) or an s3:// URL")
	default:
		return providers.InvalidParam(param, "an image URL must be a data:, s3:// or http(s) URL")
	}
	return nil
}

// audioFormats are the audio formats Converse's AudioBlock takes.
var audioFormats = map[string]bool{
	"mp3": true, "opus": true, "wav": true, "aac": true, "flac": true, "mp4": true, "ogg": true,
	"mkv": true, "mka": true, "x-aac": true, "m4a": true, "mpeg": true, "mpga": true, "pcm": true, "webm": true,
}

// audio appends an audio block for an input_audio part.
func (t *turns) audio(v gjson.Result, param string) error {
	data, format := v.Get("data"), v.Get("format")
	if data.Type != gjson.String || data.Str == "" {
		return providers.InvalidParam(param+".data", "an input_audio part needs base64 data")
	}
	if !audioFormats[format.Str] {
		return providers.InvalidParam(param+".format", "unknown audio format %q", format.Str)
	}
	b := t.block("user")
	a := b.Object("audio")
	a.Raw("format", format.Raw)
	src := a.Object("source")
	src.Raw("bytes", data.Raw)
	src.End()
	a.End()
	b.End()
	return nil
}

// documentFormats maps media types to Converse's document formats.
var documentFormats = map[string]string{
	"application/pdf":    "pdf",
	"text/csv":           "csv",
	"application/msword": "doc",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
	"application/vnd.ms-excel": "xls",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
	"text/html":     "html",
	"text/plain":    "txt",
	"text/markdown": "md",
}

// document appends a document block for a file part with file_data (a
// data: URL, or bare base64 whose format the filename's extension gives).
func (t *turns) document(f gjson.Result, param string) error {
	if f.Get("file_id").Exists() && !f.Get("file_data").Exists() {
		return providers.UnsupportedBecause(param+".file_id", "file ids are not supported by provider type "+providerName+
			": send the file's content as file_data")
	}
	fd := f.Get("file_data")
	if fd.Type != gjson.String || fd.Str == "" {
		return providers.InvalidParam(param+".file_data", "a file part needs file_data")
	}
	filename := f.Get("filename").Str
	var format, data string
	if hasPrefixFold(fd.Str, "data:") {
		media, d, err := parseDataURL(fd.Str, param+".file_data")
		if err != nil {
			return err
		}
		format, data = documentFormats[strings.ToLower(media)], d
	} else {
		data = fd.Str
	}
	if format == "" {
		format = documentFormats[mediaByExtension(filename)]
	}
	if format == "" {
		return providers.InvalidParam(param, "Bedrock takes pdf, csv, doc, docx, xls, xlsx, html, txt and md "+
			"documents: give file_data as a data: URL with the media type, or a filename with the extension")
	}
	name := t.documentName(filename)
	b := t.block("user")
	doc := b.Object("document")
	doc.Str("format", format)
	doc.Str("name", name)
	src := doc.Object("source")
	src.Str("bytes", data)
	src.End()
	doc.End()
	b.End()
	return nil
}

// documentName makes a document name Converse accepts (letters, digits,
// single spaces, hyphens, parentheses and square brackets) from a filename
// without its extension, unique within the request.
func (t *turns) documentName(filename string) string {
	if i := strings.LastIndexByte(filename, '.'); i > 0 {
		filename = filename[:i]
	}
	var sb strings.Builder
	space := false
	for _, r := range filename {
		switch {
		case r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '-' || r == '(' || r == ')' || r == '[' || r == ']'):
			if space && sb.Len() > 0 {
				sb.WriteByte(' ')
			}
			space = false
			sb.WriteRune(r)
		case r == ' ' || r == '\t' || r == '_' || r == '.':
			space = true
		default:
			if space && sb.Len() > 0 {
				sb.WriteByte(' ')
			}
			space = false
			sb.WriteByte('-')
		}
		if sb.Len() >= 100 {
			break
		}
	}
	name := sb.String()
	if name == "" {
		name = "document"
	}
	base := name
	for n := 2; ; n++ {
		dup := false
		for _, d := range t.docs {
			if d == name {
				dup = true
				break
			}
		}
		if !dup {
			break
		}
		name = base + " (" + strconv.Itoa(n) + ")"
	}
	t.docs = append(t.docs, name)
	return name
}

// parseDataURL splits data:<media type>;base64,<data>.
func parseDataURL(u, param string) (media, data string, err error) {
	meta, data, ok := strings.Cut(u[len("data:"):], ",")
	media, _, _ = strings.Cut(meta, ";")
	if !ok || media == "" || !strings.HasSuffix(strings.ToLower(meta), ";base64") || data == "" {
		return "", "", providers.InvalidParam(param, "a data URL must look like data:<media type>;base64,<data>")
	}
	return media, data, nil
}

// imageFormat maps an image media type to Converse's image format.
func imageFormat(media string) string {
	switch strings.ToLower(media) {
	case "image/png":
		return "png"
	case "image/jpeg", "image/jpg":
		return "jpeg"
	case "image/gif":
		return "gif"
	case "image/webp":
		return "webp"
	}
	return ""
}

// mediaByExtension guesses a media type from a file name or URL's
// extension, for the formats Converse knows.
func mediaByExtension(name string) string {
	if i := strings.IndexAny(name, "?#"); i >= 0 && hasPrefixFold(name, "s3://") {
		name = name[:i]
	}
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return ""
	}
	switch strings.ToLower(name[i+1:]) {
	case "png":
		return "image/png"
	case "jpg", "jpeg":
		return "image/jpeg"
	case "gif":
		return "image/gif"
	case "webp":
		return "image/webp"
	case "pdf":
		return "application/pdf"
	case "csv":
		return "text/csv"
	case "doc":
		return "application/msword"
	case "docx":
		return "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	case "xls":
		return "application/vnd.ms-excel"
	case "xlsx":
		return "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	case "html", "htm":
		return "text/html"
	case "txt":
		return "text/plain"
	case "md", "markdown":
		return "text/markdown"
	}
	return ""
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// assistantBlocks appends the blocks of assistant message i: its signed
// reasoning (thinking_blocks, restored exactly and first, as Bedrock
// returned them, for Claude models), its text, then a toolUse block per
// tool call.
func (t *turns) assistantBlocks(m *message, i int, hist *history) error {
	if err := t.reasoning(m.ThinkingBlocks, "messages["+strconv.Itoa(i)+"].thinking_blocks"); err != nil {
		return err
	}
	calls := len(m.ToolCalls.Array())
	textCache := m.CacheControl
	if calls > 0 {
		textCache = gjson.Result{} // the last toolUse block is the message's last
	}
	t.texts("assistant", m.Content, textCache)
	var err error
	j := 0
	m.ToolCalls.ForEach(func(_, call gjson.Result) bool {
		fn := call.Get("function")
		input := strings.TrimSpace(fn.Get("arguments").Str)
		if input == "" {
			input = "{}"
		} else if input[0] != '{' || !providers.ValidJSON([]byte(input)) {
			err = providers.InvalidParam(
				"messages["+strconv.Itoa(i)+"].tool_calls["+strconv.Itoa(j)+"].function.arguments",
				"function.arguments must be a JSON object encoded as a string")
			return false
		}
		name := fn.Get("name")
		hist.toolBlocks = true
		hist.addName(name.Str)
		b := t.block("assistant")
		tu := b.Object("toolUse")
		tu.Str("toolUseId", toolUseID(call.Get("id").Str))
		tu.Text("name", jsonw.StrOf(name))
		tu.Compact("input", input)
		tu.End()
		b.End()
		if cc := call.Get("cache_control"); cc.IsObject() {
			t.cachePoint("assistant", cc)
		} else if j == calls-1 {
			t.cachePoint("assistant", m.CacheControl)
		}
		j++
		return true
	})
	return err
}

// reasoning appends a reasoningContent block for each of a message's
// thinking_blocks: {"type":"thinking","thinking","signature"} becomes
// reasoningText {text, signature}, {"type":"redacted_thinking","data"}
// becomes redactedContent (base64, as Bedrock gave it).
func (t *turns) reasoning(blocks gjson.Result, param string) error {
	if !t.keepThinking || !blocks.Exists() || blocks.Type == gjson.Null {
		return nil
	}
	if !blocks.IsArray() {
		return providers.InvalidParam(param, "thinking_blocks must be an array")
	}
	var err error
	k := 0
	blocks.ForEach(func(_, tb gjson.Result) bool {
		p := param + "[" + strconv.Itoa(k) + "]"
		k++
		switch typ := tb.Get("type").Str; typ {
		case "thinking":
			text, sig := tb.Get("thinking"), tb.Get("signature")
			if text.Type != gjson.String {
				err = providers.InvalidParam(p+".thinking", "a thinking block needs its thinking text")
				return false
			}
			if sig.Exists() && sig.Type != gjson.String && sig.Type != gjson.Null {
				err = providers.InvalidParam(p+".signature", "signature must be a string")
				return false
			}
			b := t.block("assistant")
			rc := b.Object("reasoningContent")
			rt := rc.Object("reasoningText")
			rt.Raw("text", text.Raw)
			if sig.Type == gjson.String && sig.Str != "" {
				rt.Raw("signature", sig.Raw)
			}
			rt.End()
			rc.End()
			b.End()
		case "redacted_thinking":
			data := tb.Get("data")
			if data.Type != gjson.String || data.Str == "" {
				err = providers.InvalidParam(p+".data", "a redacted_thinking block needs its data")
				return false
			}
			b := t.block("assistant")
			rc := b.Object("reasoningContent")
			rc.Raw("redactedContent", data.Raw)
			rc.End()
			b.End()
		default:
			err = providers.InvalidParam(p+".type", "a thinking block's type is thinking or redacted_thinking, not %q", typ)
			return false
		}
		return true
	})
	return err
}

// emptyToolResult stands for a tool's empty output: Converse rejects blank
// text blocks, in tool results too.
const emptyToolResult = "(empty result)"

// toolResult appends the toolResult block for a tool message. Text that is
// a JSON object goes as a json block, other text as a text block. A
// cache_control on the message, or on one of its parts, puts a cache
// point after the block.
func (t *turns) toolResult(m *message, hist *history) {
	hist.toolBlocks = true
	b := t.block("user")
	tr := b.Object("toolResult")
	tr.Str("toolUseId", toolUseID(m.ToolCallID.Str))
	content := tr.Array("content")
	n := 0
	cache := m.CacheControl
	add := func(v gjson.Result) {
		if v.Type != gjson.String || strings.TrimSpace(v.Str) == "" {
			return
		}
		n++
		c := content.Object()
		if s := strings.TrimSpace(v.Str); s[0] == '{' && providers.ValidJSON([]byte(s)) {
			c.Compact("json", s)
		} else {
			c.Raw("text", v.Raw)
		}
		c.End()
	}
	if m.Content.Type == gjson.String {
		add(m.Content)
	} else {
		m.Content.ForEach(func(_, part gjson.Result) bool {
			add(providers.PartText(part))
			if c := part.Get("cache_control"); c.IsObject() {
				cache = c
			}
			return true
		})
	}
	if n == 0 {
		c := content.Object()
		c.Str("text", emptyToolResult)
		c.End()
	}
	content.End()
	tr.End()
	b.End()
	t.cachePoint("user", cache)
}

// toolUseID returns a tool call id as Converse takes it ([a-zA-Z0-9_-],
// 1 to 64 characters). Ids from OpenAI ("call_…") and Bedrock
// ("tooluse_…") pass unchanged; others are rewritten the same way wherever
// they appear, so a call and its result still pair up.
func toolUseID(id string) string {
	ok := id != "" && len(id) <= 64
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
	}
	if ok {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	b := make([]byte, 0, 64)
	for i := 0; i < len(id) && len(b) < 40; i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			c = '_'
		}
		b = append(b, c)
	}
	b = append(b, '_')
	return string(hex.AppendEncode(b, sum[:8]))
}

// writeSystem writes "system": a text block for every text of the system
// and developer messages, in order, and with caching a cache point after
// each text a cache_control marks (a part's, or the message's after its
// last).
func writeSystem(o jsonw.Object, msgs []message, caching bool) {
	mark := o.Mark()
	sys := o.Array("system")
	n := 0
	for i := range msgs {
		m := &msgs[i]
		if m.Role != "system" && m.Role != "developer" {
			continue
		}
		add := func(text, cache gjson.Result) {
			if text.Type != gjson.String || text.Str == "" {
				return
			}
			b := sys.Object()
			b.Raw("text", text.Raw)
			b.End()
			n++
			if caching && cache.IsObject() {
				writeCachePoint(sys.Object(), cache)
			}
		}
		if m.Content.Type == gjson.String {
			add(m.Content, m.CacheControl)
			continue
		}
		parts, j := len(m.Content.Array()), 0
		m.Content.ForEach(func(_, part gjson.Result) bool {
			j++
			add(providers.PartText(part), partCache(part, m.CacheControl, j == parts))
			return true
		})
	}
	if n == 0 {
		mark.Rewind()
		return
	}
	sys.End()
}

// writeInference writes "inferenceConfig" when any of its fields is set.
// Temperatures above 1 are lowered to 1: Converse's range is 0–1,
// OpenAI's 0–2.
func writeInference(o jsonw.Object, maxTokens int64, temperature, topP, stop gjson.Result) {
	mark := o.Mark()
	ic := o.Object("inferenceConfig")
	empty := ic.Mark()
	if maxTokens > 0 {
		ic.Int("maxTokens", maxTokens)
	}
	if temperature.Type == gjson.Number {
		if temperature.Num > 1 {
			ic.Int("temperature", 1)
		} else {
			ic.Raw("temperature", temperature.Raw)
		}
	}
	if topP.Type == gjson.Number {
		ic.Raw("topP", topP.Raw)
	}
	providers.WriteStops(ic, "stopSequences", stop)
	if empty.Since() == 0 {
		mark.Rewind()
		return
	}
	ic.End()
}

// writeSchema writes a tool's input schema. Converse (and the models
// behind it) want an object schema with "type"; OpenAI allows parameters
// to be left out or to be {} for a function without arguments.
func writeSchema(v jsonw.Value, params gjson.Result) {
	switch {
	case !params.IsObject():
		o := v.Object()
		o.Str("type", "object")
		o.End()
	case params.Get("type").Exists():
		v.Compact(params.Raw)
	default:
		o := v.Object()
		o.Str("type", "object")
		o.CompactMembers(strings.TrimSpace(params.Raw[1 : len(params.Raw)-1]))
		o.End()
	}
}

// writeToolSpec writes one {"toolSpec":…}.
func writeToolSpec(a jsonw.Array, name string, description gjson.Result, params gjson.Result) {
	t := a.Object()
	spec := t.Object("toolSpec")
	spec.Str("name", name)
	if description.Type == gjson.String && strings.TrimSpace(description.Str) != "" {
		spec.Raw("description", description.Raw)
	}
	schema := spec.Object("inputSchema")
	writeSchema(schema.Key("json"), params)
	schema.End()
	spec.End()
	t.End()
}

// jsonToolDescription tells the model what the structured output tool is
// for when the client's json_schema gave no description.
const jsonToolDescription = "Give your final answer by calling this tool: its input is the answer, " +
	"a JSON object that follows the input schema."

// writeToolConfig writes "toolConfig" for the client's function tools
// (with caching, a cache point after a tool a cache_control marks), its
// tool_choice and a structured output tool, if format needs one.
//
// Converse has no tool_choice "none": with none, the tools are left out,
// unless earlier turns hold tool calls or results, which Converse accepts
// only with a toolConfig; the tools then go without a choice (auto). When
// such turns come with no tools at all, the called tools are declared with
// open object schemas.
func writeToolConfig(o jsonw.Object, tools, tc gjson.Result, format *formatPlan, hist *history, caching bool) error {
	var choice, named string
	switch {
	case tc.Type == gjson.String:
		choice = tc.Str
	case tc.IsObject():
		if tc.Get("type").Str != "function" {
			return providers.UnsupportedBecause("tool_choice",
				"tool_choice of type "+strconv.Quote(tc.Get("type").Str)+" is not supported by provider type "+providerName)
		}
		choice, named = "function", tc.Get("function.name").Str
	}

	// The client's tools, checked before anything is written.
	var count int
	var err error
	tools.ForEach(func(_, t gjson.Result) bool {
		if typ := t.Get("type").Str; typ != "function" {
			err = providers.UnsupportedBecause("tools["+strconv.Itoa(count)+"].type",
				typ+" tools are not supported by provider type "+providerName)
			return false
		}
		if t.Get("function.name").Str == JSONToolName {
			err = providers.InvalidParam("tools["+strconv.Itoa(count)+"].function.name",
				"the tool name %s is reserved for structured output on provider type %s", JSONToolName, providerName)
			return false
		}
		count++
		return true
	})
	if err != nil {
		return err
	}
	if count == 0 && (choice == "required" || choice == "function") {
		return providers.InvalidParam("tool_choice", "tool_choice %q needs tools", choice)
	}

	withTools := count > 0 && (choice != "none" || hist.toolBlocks || format.tool)
	synthesize := count == 0 && hist.toolBlocks
	if !withTools && !synthesize && !format.tool {
		return nil
	}

	cfg := o.Object("toolConfig")
	list := cfg.Array("tools")
	if withTools {
		tools.ForEach(func(_, t gjson.Result) bool {
			fn := t.Get("function")
			writeToolSpec(list, fn.Get("name").Str, fn.Get("description"), fn.Get("parameters"))
			if cache := t.Get("cache_control"); caching && cache.IsObject() {
				writeCachePoint(list.Object(), cache)
			}
			return true
		})
	}
	if synthesize {
		for _, name := range hist.toolNames {
			if name == JSONToolName && format.tool {
				continue
			}
			writeToolSpec(list, name, gjson.Result{}, gjson.Result{})
		}
	}
	if format.tool {
		desc := format.description
		if desc.Type != gjson.String || strings.TrimSpace(desc.Str) == "" {
			desc = gjson.Result{Type: gjson.String, Raw: strconv.Quote(jsonToolDescription), Str: jsonToolDescription}
		}
		writeToolSpec(list, JSONToolName, desc, format.schema)
	}
	list.End()

	switch {
	case choice == "function":
		writeToolChoiceTool(cfg, named)
	case format.tool && (!withTools || choice == "none"):
		writeToolChoiceTool(cfg, JSONToolName)
	case format.tool, choice == "required":
		// With the structured output tool beside the client's, "any" lets
		// the model call a tool of the client's or give its final answer.
		c := cfg.Object("toolChoice")
		c.Object("any").End()
		c.End()
	case choice == "auto":
		c := cfg.Object("toolChoice")
		c.Object("auto").End()
		c.End()
	}
	cfg.End()
	return nil
}

// writeToolChoiceTool writes the toolChoice that forces the tool name.
func writeToolChoiceTool(o jsonw.Object, name string) {
	c := o.Object("toolChoice")
	t := c.Object("tool")
	t.Str("name", name)
	t.End()
	c.End()
}

// formatPlan is how response_format reaches the model.
type formatPlan struct {
	native      bool         // outputConfig.textFormat with schema
	tool        bool         // the structured output tool, forced or among others
	schema      gjson.Result // the JSON schema (tool: absent means an open object)
	name        gjson.Result // json_schema.name
	description gjson.Result // json_schema.description
}

// planFormat reads response_format.
func (c Chat) planFormat(rf gjson.Result) (formatPlan, error) {
	var p formatPlan
	if !rf.IsObject() {
		return p, nil
	}
	switch typ := rf.Get("type").Str; typ {
	case "text":
	case "json_object":
		p.tool = true
	case "json_schema":
		js := rf.Get("json_schema")
		if js.Exists() && !js.IsObject() {
			return p, providers.InvalidParam("response_format.json_schema", "json_schema must be an object")
		}
		p.schema, p.name, p.description = js.Get("schema"), js.Get("name"), js.Get("description")
		if p.schema.Exists() && p.schema.Type != gjson.Null && !p.schema.IsObject() {
			return p, providers.InvalidParam("response_format.json_schema.schema", "schema must be a JSON Schema object")
		}
		if !p.schema.IsObject() {
			p.schema = gjson.Result{}
		}
		switch c.StructuredOutput {
		case "", StructuredNative:
			// Bedrock's native format wants a schema; without one the
			// answer is any object, which only the tool can ask for.
			p.native = p.schema.Exists()
			p.tool = !p.native
		case StructuredTool:
			p.tool = true
		default:
			return p, &providers.Error{Status: http.StatusInternalServerError, Type: "server_error",
				Message: "unknown structured output mode " + strconv.Quote(c.StructuredOutput)}
		}
	default:
		return p, providers.UnsupportedBecause("response_format.type",
			"response_format "+strconv.Quote(typ)+" is not supported by provider type "+providerName)
	}
	return p, nil
}

// writeOutputConfig writes "outputConfig": the native structured output
// format and the reasoning effort of adaptive thinking.
func writeOutputConfig(o jsonw.Object, p *formatPlan, effort string) {
	if !p.native && effort == "" {
		return
	}
	oc := o.Object("outputConfig")
	if p.native {
		tf := oc.Object("textFormat")
		tf.Str("type", "json_schema")
		st := tf.Object("structure")
		js := st.Object("jsonSchema")
		// Converse takes the schema as a string of JSON.
		js.Str("schema", providers.CompactJSON(p.schema.Raw))
		if p.name.Type == gjson.String && p.name.Str != "" {
			js.Raw("name", p.name.Raw)
		}
		if p.description.Type == gjson.String && p.description.Str != "" {
			js.Raw("description", p.description.Raw)
		}
		js.End()
		st.End()
		tf.End()
	}
	if effort != "" {
		oc.Str("effort", effort)
	}
	oc.End()
}

// writeServiceTier maps OpenAI's service_tier to Bedrock's serviceTier
// where both have the tier (priority, default, flex); "auto", "scale" and
// other tiers are dropped.
func writeServiceTier(o jsonw.Object, tier gjson.Result) {
	switch tier.Str {
	case "priority", "default", "flex":
		st := o.Object("serviceTier")
		st.Str("type", tier.Str)
		st.End()
	}
}

// writeRequestMetadata maps metadata to Bedrock's requestMetadata (which
// tags the invocation log). Entries Bedrock would refuse (more than 256
// characters, characters outside [a-zA-Z0-9 :_@$#=/+,.-], beyond 16) are
// left out: they only label the request.
func writeRequestMetadata(o jsonw.Object, md gjson.Result) {
	if !md.IsObject() {
		return
	}
	mark := o.Mark()
	rm := o.Object("requestMetadata")
	n := 0
	md.ForEach(func(k, v gjson.Result) bool {
		if v.Type != gjson.String || !metadataOK(k.Str, 1) || !metadataOK(v.Str, 0) {
			return true
		}
		n++
		rm.Str(k.Str, v.Str)
		return n < 16
	})
	if n == 0 {
		mark.Rewind()
		return
	}
	rm.End()
}

func metadataOK(s string, minLen int) bool {
	if len(s) < minLen || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(" \t\n\r:_@$#=/+,-.", c) >= 0) {
			return false
		}
	}
	return true
}
