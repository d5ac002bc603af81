package gateway

import (
	"bytes"
	"encoding/base64"
	"io"
	"math"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers"
)

// This file estimates what a request will use before it is sent, for the
// limits and budgets that count it up front (admission.go): its input tokens
// and its output at most, priced at the dearest target that may serve it.
// The estimate must not be passed by what the provider then counts: text
// is bounded by providers.MaxTextTokens, media by rules of their own, and
// the output by the maximum the request asks for, times the answers it
// asks for.

// estimate is what a request is expected to use before it is sent.
type estimate struct {
	tokens int64 // counted against tokens per minute
	cost   pricing.Money
	priced bool // every target that may serve it has a price
}

// outputAllowance is the answer a request without a maximum is expected to
// cost: what its budget reservation counts for the output of each answer.
const outputAllowance = 1000

// estimateCall estimates what c will use: its input (estimateBody; the
// inputs of an embeddings request, the query and documents of a rerank),
// its output by the maximum it asks for times the answers it asks for,
// priced at the most expensive of the targets that may serve it.
func (g *Gateway) estimateCall(c *request, targets []Target) estimate {
	u, tokens := estimateUsage(c)
	e := estimate{tokens: tokens, priced: true}
	for _, t := range targets {
		if !c.endpoint.serves(t.Provider) {
			continue
		}
		cost, ok := g.prices.Cost(t.Provider.Type, t.Model, u)
		if !ok {
			e.priced = false
			continue
		}
		// The prompt may be written to the provider's cache, at a rate of
		// its own, higher than the input's where there is one.
		if u.PromptTokens > 0 {
			w := u
			w.CacheWriteTokens = w.PromptTokens
			if wc, ok := g.prices.Cost(t.Provider.Type, t.Model, w); ok {
				cost = max(cost, wc)
			}
		}
		e.cost = max(e.cost, cost)
	}
	return e
}

// estimateUsage bounds what c uses, as the price table reads it, and the
// tokens a tokens-per-minute limit counts for it.
func estimateUsage(c *request) (u pricing.Usage, tokens int64) {
	switch {
	case c.embeddings != nil:
		u.EmbeddingTokens = embeddingsTokens(c.embeddings)
		tokens = u.EmbeddingTokens
	case c.rerank != nil:
		u.PromptTokens, u.Searches = rerankEstimate(c.rerank)
		tokens = u.PromptTokens
	default:
		b := estimateBody(c.body)
		if c.history != nil {
			b.in = satAdd(b.in, estimateJSON(c.history, contextTurns).in)
		}
		out := satMul(b.maxOut, b.answers)
		tokens = satAdd(b.in, out)
		if b.maxOut == 0 {
			out = satMul(outputAllowance, b.answers)
		}
		u.PromptTokens, u.CompletionTokens = b.in, out
	}
	return u, tokens
}

// embeddingsTokens bounds the input tokens of an embeddings request: its
// texts by providers.MaxTextTokens, its token ids exactly.
func embeddingsTokens(r *providers.EmbeddingsRequest) int64 {
	var n int64
	for _, t := range r.Texts {
		n = satAdd(n, providers.MaxTextTokens(t))
	}
	for _, t := range r.Tokens {
		n = satAdd(n, int64(len(t)))
	}
	return n
}

// A rerank is billed by searches (Cohere's search units, Bedrock's
// queries) or by tokens: a search ranks up to rerankDocuments documents,
// and a document that is longer, with the query, than rerankChunk tokens
// counts as one document per chunk of that length.
const (
	rerankDocuments = 100
	rerankChunk     = 500
)

// rerankEstimate bounds what a rerank request uses: its tokens (the query
// with each document, as rerankers read them) and its searches.
func rerankEstimate(r *providers.RerankRequest) (tokens, searches int64) {
	q := providers.MaxTextTokens(r.Query)
	var chunks int64
	for _, d := range r.Documents {
		t := satAdd(q, providers.MaxTextTokens(d))
		tokens = satAdd(tokens, t)
		chunks = satAdd(chunks, max(1, ceilDiv(t, rerankChunk)))
	}
	return tokens, max(1, ceilDiv(chunks, rerankDocuments))
}

// bodyEstimate is what estimateBody reads of a request body.
type bodyEstimate struct {
	in      int64 // input tokens, at most
	maxOut  int64 // the largest maximum output it asks for; 0: none
	answers int64 // the answers it asks for (n, best_of); at least 1
}

// estimateBody bounds the input of a request body of any of the APIs
// (estimateJSON) and reads, at its top level, the maximum output it asks
// for and how many answers.
func estimateBody(body []byte) bodyEstimate { return estimateJSON(body, contextRoot) }

// The fields at a request's top level that estimateBody reads besides the
// text: the maximum output of each answer (chat, Responses, Messages) and
// the number of answers (chat's n; best_of, which some OpenAI-compatible
// servers take, generates that many and returns n).
var (
	maxOutputFields = [...]string{"max_completion_tokens", "max_tokens", "max_output_tokens"}
	answersFields   = [...]string{"n", "best_of"}
)

// mediaContext is where a JSON container is in a request, for what its
// strings are: text, or the data of an image, audio or a document (which
// providers count by rules of their own) where the APIs put content parts.
type mediaContext uint8

const (
	contextNone   mediaContext = iota
	contextRoot                // the request body
	contextTurns               // messages (chat, Messages) or input items (Responses)
	contextParts               // a message's or a tool result's content parts
	contextImage               // a chat image_url part's image_url
	contextAudio               // an input_audio part's input_audio
	contextFile                // a chat file part's file
	contextSource              // an Anthropic image or document block's source
)

// member is the context of the value of key in a container of context c.
func (c mediaContext) member(key string) mediaContext {
	switch c {
	case contextRoot:
		if key == "messages" || key == "input" {
			return contextTurns
		}
	case contextTurns:
		if key == "content" || key == "output" {
			return contextParts
		}
	case contextParts:
		switch key {
		case "content", "output":
			return contextParts // a tool result's
		case "image_url":
			return contextImage
		case "input_audio":
			return contextAudio
		case "file":
			return contextFile
		case "source":
			return contextSource
		}
	case contextSource:
		if key == "content" {
			return contextParts // a document of content blocks
		}
	}
	return contextNone
}

// The kinds of strings that are not text, by their context and key.
type mediaKind uint8

const (
	mediaText   mediaKind = iota
	mediaImage            // an image, by data: URL or URL
	mediaAudio            // the base64 of audio
	mediaFile             // a data: URL (or the base64) of a file
	mediaSource           // an Anthropic source's data, as its type says
)

// stringKind is what the string value of key in a container of context c
// holds.
func (c mediaContext) stringKind(key string) mediaKind {
	switch {
	case c == contextParts && key == "image_url", c == contextImage && key == "url", c == contextSource && key == "url":
		return mediaImage
	case c == contextParts && key == "file_data", c == contextFile && key == "file_data":
		return mediaFile
	case c == contextAudio && key == "data":
		return mediaAudio
	case c == contextSource && key == "data":
		return mediaSource
	}
	return mediaText
}

// jsonFrame is a JSON container estimateJSON is in.
type jsonFrame struct {
	object bool
	ctx    mediaContext
}

// source is what an Anthropic source object holds, read as its members
// come (its data may come before its type): the data is counted when the
// object ends.
type source struct {
	depth     int    // the frames open at the source object, itself included
	typ       string // "base64", "text", "url", …
	mediaType string
	data      string // unescaped; "" when none
	hasData   bool
}

// estimateJSON bounds the input tokens of a JSON body whose top-level
// value is in context root, in one pass over its bytes:
//
//   - every key and every string, number, true, false and null costs
//     providers.MaxTextTokens of its text (keys and values alike: tool
//     schemas are shown to the model), except the value of "model" at the
//     top level;
//   - every object and array costs a token more (the punctuation a model
//     is shown, the framing of each message);
//   - the data of an image, audio or a document where the APIs take it
//     (chat's image_url, input_audio and file parts, Responses' input_image
//     and input_file, Anthropic's image and document sources, in messages,
//     input items and tool results) costs by mediaTokens' rules rather than
//     as text; anywhere else — in a tool's schema or arguments — the same
//     string is text.
//
// It reads the top level's maximum output (the largest of
// maxOutputFields) and answers (the largest of answersFields).
//
// It scans the bytes once, keeping only which containers it is in: a walk
// with gjson's ForEach reads every nested value once per level above it,
// and request bodies nest (messages, content parts, tool calls). The body
// has been checked to be JSON; on a broken one it returns some estimate,
// never panics, and never reads past the end.
func estimateJSON(body []byte, root mediaContext) bodyEstimate {
	var (
		stack     [16]jsonFrame
		frames    = stack[:0] // the containers we are in
		expectKey bool        // in an object, before a key
		key       string      // the key of the value to come, in an object
		srcs      [2]source   // the Anthropic sources open, innermost last
		open      int         // of srcs
		extra     int         // sources open beyond len(srcs): their data is text
		outs      [len(maxOutputFields) + len(answersFields)]string
	)
	var in int64
	for i := 0; i < len(body); i++ {
		raw := "" // a number's or a literal's text
		switch c := body[i]; c {
		case '"':
			end := providers.SkipString(body, i)
			if end < 0 {
				return finish(in, outs)
			}
			start := i + 1
			i = end - 1 // the closing quote
			str := providers.InPlace(body[start:i])
			if bytes.IndexByte(body[start:i], '\\') >= 0 {
				str = gjson.Parse(providers.InPlace(body[start-1 : i+1])).Str
			}
			if expectKey {
				expectKey, key = false, str
				in = satAdd(in, providers.MaxTextTokens(str))
				continue
			}
			top := contextNone
			if len(frames) > 0 && frames[len(frames)-1].object {
				top = frames[len(frames)-1].ctx
			} else if len(frames) == 0 {
				key = ""
			}
			if top == contextRoot && key == "model" {
				continue
			}
			kind := top.stringKind(key)
			if top == contextSource && open > 0 && srcs[open-1].depth == len(frames) {
				s := &srcs[open-1]
				switch key {
				case "type":
					s.typ = str
				case "media_type":
					s.mediaType = str
				}
				if kind == mediaSource {
					if s.hasData { // a repeated key: the earlier data is text
						in = satAdd(in, providers.MaxTextTokens(s.data))
					}
					s.data, s.hasData = str, true
					continue
				}
			}
			if kind == mediaSource {
				kind = mediaText // a source too deep to keep: its data is text
			}
			in = satAdd(in, mediaTokens(kind, str))
			continue
		case '{', '[':
			ctx := root
			if root == contextRoot && c == '[' {
				ctx = contextNone // a request is an object
			}
			if n := len(frames); n > 0 {
				ctx = frames[n-1].ctx
				if frames[n-1].object {
					ctx = ctx.member(key)
				}
			}
			frames = append(frames, jsonFrame{object: c == '{', ctx: ctx})
			expectKey = c == '{'
			in = satAdd(in, 1)
			if ctx == contextSource && c == '{' {
				if open < len(srcs) {
					srcs[open] = source{depth: len(frames)}
					open++
				} else {
					extra++
				}
			}
			continue
		case '}', ']':
			if len(frames) == 0 {
				continue
			}
			if f := frames[len(frames)-1]; f.object && f.ctx == contextSource {
				switch {
				case extra > 0:
					extra--
				case open > 0:
					open--
					if s := &srcs[open]; s.hasData {
						in = satAdd(in, sourceTokens(s))
					}
				}
			}
			frames = frames[:len(frames)-1]
			expectKey = false
			continue
		case ',':
			if len(frames) > 0 {
				expectKey = frames[len(frames)-1].object
			}
			continue
		case ':', ' ', '\t', '\n', '\r':
			continue
		default: // a number, true, false or null
			start := i
			for i+1 < len(body) && !jsonDelimiter[body[i+1]] {
				i++
			}
			raw = providers.InPlace(body[start : i+1])
			in = satAdd(in, providers.MaxTextTokens(raw))
		}
		// A number or a literal at the top level may be one of the fields
		// estimateBody reads.
		if len(frames) == 1 && frames[0].ctx == contextRoot && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
			for j, f := range maxOutputFields {
				if key == f {
					outs[j] = maxNumber(outs[j], raw)
				}
			}
			for j, f := range answersFields {
				if key == f {
					outs[len(maxOutputFields)+j] = maxNumber(outs[len(maxOutputFields)+j], raw)
				}
			}
		}
	}
	// A source still open (a broken body): its data is text.
	for _, s := range srcs[:open] {
		if s.hasData {
			in = satAdd(in, providers.MaxTextTokens(s.data))
		}
	}
	return finish(in, outs)
}

// finish turns the texts of the top-level numbers estimateJSON kept into
// the estimate.
func finish(in int64, outs [len(maxOutputFields) + len(answersFields)]string) bodyEstimate {
	e := bodyEstimate{in: in, answers: 1}
	for j, raw := range outs {
		n := countOf(raw)
		if j < len(maxOutputFields) {
			e.maxOut = max(e.maxOut, n)
		} else {
			e.answers = max(e.answers, n)
		}
	}
	return e
}

// jsonDelimiter marks the bytes that end a number, true, false or null.
var jsonDelimiter = [256]bool{',': true, ':': true, ']': true, '}': true, ' ': true, '\t': true,
	'\n': true, '\r': true, '"': true, '{': true, '[': true}

// maxNumber returns, of two numbers' texts ("" for none), the larger.
func maxNumber(a, b string) string {
	if a == "" || countOf(b) > countOf(a) {
		return b
	}
	return a
}

// countOf reads a count (a maximum of tokens, a number of answers) from a
// number's text: a fraction rounds up, what is not a positive number is 0,
// and what passes an int64 saturates.
func countOf(raw string) int64 {
	if raw == "" {
		return 0
	}
	if n, ok := providers.Digits(raw); ok {
		return n
	}
	v := gjson.Parse(raw)
	if v.Type != gjson.Number || !(v.Num > 0) {
		return 0
	}
	if v.Num >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(math.Ceil(v.Num))
}

// Media are counted by rules of their own, each about the most a provider
// counts for one:
const (
	// imageTokens is an image: the cost of the largest image Anthropic
	// takes without resizing, above what OpenAI counts for any image in
	// high detail on its GPT-4o models.
	imageTokens = 1600
	// audioBytesPerToken is audio: Gemini counts 32 tokens a second (more
	// than OpenAI), and a second of the lowest-rate audio the APIs take
	// (8 kb/s MP3) is 1,000 bytes.
	audioBytesPerToken = 24
	// pdfPageTokens is a page of a PDF: its text and its image, as
	// Anthropic and OpenAI show both to the model.
	pdfPageTokens = 3000
)

// mediaTokens bounds the tokens of a string of kind k (mediaSource is
// sourceTokens').
func mediaTokens(k mediaKind, s string) int64 {
	switch k {
	case mediaImage:
		return imageTokens
	case mediaAudio:
		return audioTokens(len(s))
	case mediaFile:
		mediaType, data, ok := cutDataURL(s)
		if !ok {
			mediaType, data = "", s
		}
		return binaryTokens(mediaType, data)
	}
	return providers.MaxTextTokens(s)
}

// sourceTokens bounds the tokens of an Anthropic source's data: base64 by
// its media type, anything else (a plain-text document's text) as text.
func sourceTokens(s *source) int64 {
	if s.typ != "base64" {
		return providers.MaxTextTokens(s.data)
	}
	return binaryTokens(s.mediaType, s.data)
}

// binaryTokens bounds the tokens of the base64 data of a file of a media
// type: an image, audio, a PDF by its pages, anything else — an office
// document, a text file — a token a byte, more than its text can cost.
func binaryTokens(mediaType, data string) int64 {
	mediaType = strings.ToLower(mediaType)
	switch {
	case strings.HasPrefix(mediaType, "image/"):
		return imageTokens
	case strings.HasPrefix(mediaType, "audio/"):
		return audioTokens(len(data))
	case mediaType == "application/pdf", mediaType == "" && strings.HasPrefix(data, "JVBERi0"): // %PDF-
		return int64(pdfPages(data)) * pdfPageTokens
	}
	return ceilDiv(int64(len(data))*3, 4) + 1
}

// audioTokens bounds the tokens of audio whose base64 is n bytes long.
func audioTokens(n int) int64 {
	return ceilDiv(ceilDiv(int64(n)*3, 4), audioBytesPerToken) + 1
}

// cutDataURL splits a data: URL with base64 data into its media type and
// data.
func cutDataURL(s string) (mediaType, data string, ok bool) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return "", "", false
	}
	head, data, ok := strings.Cut(rest, ";base64,")
	if !ok {
		return "", "", false
	}
	mediaType, _, _ = strings.Cut(head, ";")
	return mediaType, data, true
}

// pdfPages counts the pages of a PDF from its base64, decoding it a piece
// at a time: the page objects ("/Type /Page", not "/Pages"), at least 1.
// Pages kept in compressed object streams are not seen.
func pdfPages(b64 string) int {
	const (
		marker  = "/Type"
		overlap = 16 // keeps a marker cut between two pieces
	)
	dec := base64.NewDecoder(base64.StdEncoding, strings.NewReader(b64))
	var buf [4096 + overlap]byte
	pages, kept := 0, 0
	for {
		n, err := io.ReadFull(dec, buf[kept:])
		if n == 0 {
			break
		}
		chunk := buf[:kept+n]
		last := err != nil
		// Look for markers that start before the overlap kept for the
		// next piece (all of them in the last piece).
		limit := len(chunk)
		if !last {
			limit = len(chunk) - overlap
		}
		for from := 0; ; {
			j := bytes.Index(chunk[from:], []byte(marker))
			if j < 0 || from+j >= limit {
				break
			}
			from += j + len(marker)
			rest := bytes.TrimLeft(chunk[from:], " \r\n\t")
			if bytes.HasPrefix(rest, []byte("/Page")) && (len(rest) == len("/Page") || rest[len("/Page")] != 's') {
				pages++
			}
		}
		if last {
			break
		}
		kept = copy(buf[:], chunk[len(chunk)-overlap:])
	}
	return max(pages, 1)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// satAdd and satMul add and multiply counts that are not negative,
// saturating at the largest int64: a client may ask for any number.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}
