package messages

import (
	"bytes"
	"encoding/base64"
	"image"
	_ "image/gif" // DecodeConfig reads the sizes of GIF, JPEG and PNG images
	_ "image/jpeg"
	_ "image/png"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Token estimate constants. They are a heuristic, not a tokenizer: see
// EstimateTokens.
const (
	// perMessage covers a message's role and delimiters; perRequest the
	// priming of the answer (OpenAI's cookbook counts 3 and 3).
	perMessage = 3
	perRequest = 3
	// perTool covers a tool definition's framing besides its JSON.
	perTool = 8
	// imageTokensMax is an image's cost when its size is unknown (a URL,
	// or a format whose size this code does not read): Anthropic's cost of
	// the largest image it takes without resizing, about 1,600 tokens.
	imageTokensMax = 1600
	// pixelsPerToken is Anthropic's published image cost, width ×
	// height / 750, after resizing to at most 1568 pixels on the long side.
	pixelsPerToken = 750
	maxImageEdge   = 1568
	// pdfPageTokens is an estimate per PDF page (text and page image).
	pdfPageTokens = 2000
)

// CountTokens answers POST /v1/messages/count_tokens for a provider that
// has no such endpoint: {"input_tokens": n}, where n is EstimateTokens of
// the request translated to the hub. It is an estimate, not the provider's
// own count: clients (Claude Code among them) use it to budget the context
// window, where being close is what matters.
func CountTokens(body []byte) ([]byte, error) {
	hub, err := ToChat(body)
	if err != nil {
		return nil, err
	}
	w := jsonw.New(make([]byte, 0, 32))
	o := w.Object()
	o.Int("input_tokens", int64(EstimateTokens(hub)))
	o.End()
	return w.Finish()
}

// EstimateTokens estimates the input tokens of a hub chat request without
// a tokenizer (each model family has its own, and shipping them would cost
// megabytes of vocabulary):
//
//   - text: providers.EstimateTextTokens (ASCII characters / 4, other
//     letters / 2, one token per Han, Hiragana, Katakana or Hangul
//     character), rounded up per text;
//   - 3 tokens per message and 3 per request for roles and delimiters;
//   - tools: their JSON / 4, plus 8 each; tool calls: name and arguments;
//   - images: width × height / 750 after fitting into 1568 × 1568 pixels
//     when the data: URL holds a GIF, JPEG or PNG whose size can be read,
//     else 1,600;
//   - PDFs: 2,000 tokens per page (pages counted in the file).
func EstimateTokens(hub []byte) int {
	root := gjson.ParseBytes(hub)
	n := perRequest
	root.Get("messages").ForEach(func(_, m gjson.Result) bool {
		n += perMessage
		n += contentTokens(m.Get("content"))
		n += textTokens(m.Get("reasoning_content").Str)
		m.Get("tool_calls").ForEach(func(_, c gjson.Result) bool {
			n += perMessage + textTokens(c.Get("function.name").Str) + textTokens(c.Get("function.arguments").Str)
			return true
		})
		return true
	})
	root.Get("tools").ForEach(func(_, t gjson.Result) bool {
		n += perTool + textTokens(t.Raw)
		return true
	})
	if rf := root.Get("response_format.json_schema.schema"); rf.Exists() {
		n += textTokens(rf.Raw)
	}
	return n
}

func contentTokens(c gjson.Result) int {
	if c.Type == gjson.String {
		return textTokens(c.Str)
	}
	n := 0
	c.ForEach(func(_, part gjson.Result) bool {
		switch part.Get("type").Str {
		case "text":
			n += textTokens(part.Get("text").Str)
		case "image_url":
			n += imageTokens(part.Get("image_url.url").Str)
		case "file":
			n += pdfTokens(part.Get("file.file_data").Str)
		}
		return true
	})
	return n
}

// textTokens estimates the tokens of s.
func textTokens(s string) int { return providers.EstimateTextTokens(s) }

// imageTokens estimates an image from its URL: a data: URL's image size
// where it can be read, else the cost of the largest image.
func imageTokens(url string) int {
	_, data, ok := strings.Cut(url, ";base64,")
	if !ok || !strings.HasPrefix(url, "data:") {
		return imageTokensMax
	}
	// The header is enough for DecodeConfig: decode only the start.
	head := data[:min(len(data), 4096)]
	head = head[:len(head)/4*4]
	raw, err := base64.StdEncoding.DecodeString(head)
	if err != nil {
		return imageTokensMax
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return imageTokensMax
	}
	w, h := float64(cfg.Width), float64(cfg.Height)
	if long := max(w, h); long > maxImageEdge {
		w, h = w*maxImageEdge/long, h*maxImageEdge/long
	}
	return min(max(int(w*h/pixelsPerToken), 1), imageTokensMax)
}

// pdfTokens estimates a PDF from its data: URL by counting its pages.
func pdfTokens(url string) int {
	_, data, ok := strings.Cut(url, ";base64,")
	if !ok {
		return pdfPageTokens
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return pdfPageTokens
	}
	pages := 0
	for _, marker := range [][]byte{[]byte("/Type /Page"), []byte("/Type/Page")} {
		rest := raw
		for {
			i := bytes.Index(rest, marker)
			if i < 0 {
				break
			}
			rest = rest[i+len(marker):]
			if len(rest) == 0 || rest[0] != 's' { // not /Pages
				pages++
			}
		}
	}
	return max(pages, 1) * pdfPageTokens
}
