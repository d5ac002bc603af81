package responses

import (
	"encoding/base64"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// encryptedPrefix starts every encrypted_content this package writes.
// The rest is the URL-safe base64 (no padding) of the JSON array of the
// hub's thinking_blocks. It is not encrypted: a thinking block's signature
// (or a redacted block's data) already stops anyone from altering it, and
// its text is the provider's own reasoning text, which the summary shows.
const encryptedPrefix = "mg1."

// appendEncrypted appends the encrypted_content string for blocks, the
// comma-separated thinking block objects.
func appendEncrypted(b, blocks []byte) []byte {
	plain := make([]byte, 0, len(blocks)+2)
	plain = append(append(append(plain, '['), blocks...), ']')
	b = append(b, '"')
	b = append(b, encryptedPrefix...)
	b = base64.RawURLEncoding.AppendEncode(b, plain)
	return append(b, '"')
}

// decodeEncrypted returns the thinking blocks an encrypted_content of this
// package holds, as comma-separated compact JSON objects, and false for
// anything else (OpenAI's own encrypted reasoning, or a damaged value),
// which no chat provider can use.
func decodeEncrypted(s string) ([]byte, bool) {
	rest, ok := strings.CutPrefix(s, encryptedPrefix)
	if !ok {
		return nil, false
	}
	plain, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || !providers.ValidJSON(plain) {
		return nil, false
	}
	arr := gjson.ParseBytes(plain)
	if !arr.IsArray() {
		return nil, false
	}
	var out []byte
	ok = true
	arr.ForEach(func(_, block gjson.Result) bool {
		if !validThinkingBlock(block) {
			ok = false
			return false
		}
		if len(out) > 0 {
			out = append(out, ',')
		}
		out = providers.AppendCompactJSON(out, block.Raw)
		return true
	})
	return out, ok && len(out) > 0
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
