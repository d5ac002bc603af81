package gemini

import (
	"strings"
)

// signatureSep joins a tool call id and the thought signature of its
// functionCall part: "<id>__thought__<signature>". It is LiteLLM's
// separator, so histories pass between the two gateways (and tools that
// know the convention) unchanged.
const signatureSep = "__thought__"

// generatedPrefix starts the ids the translator makes up for function calls
// Gemini gave no id: "call_" and 24 base62 characters. Such ids are never
// sent to Gemini; any other id is Gemini's own and goes back in
// functionCall.id and functionResponse.id.
const generatedPrefix = "call_"

// dummySignature is the value Google documents for function calls in the
// current turn whose signature is lost (history written by another model
// or by hand): Gemini 3 then skips its validation instead of answering 400.
const dummySignature = "skip_thought_signature_validator"

// appendCallID appends to b the text of a tool call id: id (or, when it
// is empty, a generated one) and, when sig is not empty, the separator and
// sig in URL-safe base64 without padding, so that the id holds only
// [A-Za-z0-9_-] besides what Gemini's own id holds, as Anthropic's ids must.
func appendCallID(b []byte, id, sig string, newID func() string) []byte {
	if id == "" {
		b = append(b, generatedPrefix...)
		b = append(b, newID()...)
	} else {
		b = append(b, id...)
	}
	if sig != "" {
		b = append(b, signatureSep...)
		for i := 0; i < len(sig); i++ {
			switch c := sig[i]; c {
			case '+':
				b = append(b, '-')
			case '/':
				b = append(b, '_')
			case '=':
			default:
				if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
					// Not base64 at all: Gemini will not accept the
					// signature back, nothing else breaks.
					continue
				}
				b = append(b, c)
			}
		}
	}
	return b
}

// splitCallID splits a tool call id into the id Gemini knows ("" for a
// generated id, which Gemini never saw) and the thought signature carried
// in it, as standard base64 with padding ("" for none).
func splitCallID(full string) (id, sig string) {
	id, enc, found := strings.Cut(full, signatureSep)
	if isGenerated(id) {
		id = ""
	}
	if !found || enc == "" {
		return id, ""
	}
	return id, stdBase64(enc)
}

// isGenerated reports whether id is one the translator made up.
func isGenerated(id string) bool {
	if len(id) != len(generatedPrefix)+24 || !strings.HasPrefix(id, generatedPrefix) {
		return false
	}
	for i := len(generatedPrefix); i < len(id); i++ {
		if strings.IndexByte(base62, id[i]) < 0 {
			return false
		}
	}
	return true
}

// stdBase64 turns URL-safe base64 (with or without padding) into standard
// base64 with padding; standard base64 passes unchanged.
func stdBase64(s string) string {
	pad := (4 - len(s)%4) % 4
	if !strings.ContainsAny(s, "-_") && pad == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+pad)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '-':
			b = append(b, '+')
		case '_':
			b = append(b, '/')
		default:
			b = append(b, c)
		}
	}
	if pad < 3 { // a remainder of 1 is not base64; leave it for Gemini to refuse
		for range pad {
			b = append(b, '=')
		}
	}
	return string(b)
}
