package responses

import (
	"encoding/base64"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// encryptedPrefix starts every encrypted_content this package writes.
// The rest is the URL-safe base64 (no padding) of the JSON array of the
// hub's thinking_blocks. It is not encrypted: a thinking block's signature
// (or a redacted block's data) already stops anyone from altering it, and
// its text is the provider's own reasoning text, which the summary shows.
const encryptedPrefix = "mg1."

// writeEncrypted writes the encrypted_content string for blocks.
func writeEncrypted(v jsonw.Value, blocks *jsonw.List) {
	w := jsonw.New(nil)
	a := w.Array()
	a.List(blocks)
	a.End()
	plain, _ := w.Finish() // straight-line writing: no misuse
	v.Encoded(encryptedPrefix, base64.RawURLEncoding, plain)
}

// decodeEncrypted adds to blocks the thinking blocks an encrypted_content
// of this package holds, as compact JSON, and reports false for anything
// else (OpenAI's own encrypted reasoning, or a damaged value), which no
// chat provider can use: then it adds nothing.
func decodeEncrypted(s string, blocks *jsonw.List) bool {
	rest, ok := strings.CutPrefix(s, encryptedPrefix)
	if !ok {
		return false
	}
	plain, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || !providers.ValidJSON(plain) {
		return false
	}
	arr := gjson.ParseBytes(plain)
	if !arr.IsArray() {
		return false
	}
	n := 0
	ok = true
	arr.ForEach(func(_, block gjson.Result) bool {
		if !validThinkingBlock(block) {
			ok = false
			return false
		}
		n++
		return true
	})
	if !ok || n == 0 {
		return false
	}
	arr.ForEach(func(_, block gjson.Result) bool {
		addCompact(blocks, block.Raw)
		return true
	})
	return true
}

// validThinkingBlock reports whether v is a thinking block as the hub
// carries them: {"type":"thinking","thinking","signature"} or
// {"type":"redacted_thinking","data"}.
func validThinkingBlock(v gjson.Result) bool {
	if !v.IsObject() {
		return false
	}
	switch v.Get("type").Str {
	case "thinking":
		return v.Get("thinking").Type == gjson.String && v.Get("signature").Type == gjson.String
	case "redacted_thinking":
		return v.Get("data").Type == gjson.String
	}
	return false
}
