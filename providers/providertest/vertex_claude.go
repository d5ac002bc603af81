package providertest

import (
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// vertexAnthropicVersion is the anthropic_version a Messages body must
// carry on Vertex AI.
const vertexAnthropicVersion = "vertex-2023-10-16"

// vertexClaudePath reports whether a Vertex AI path (below /v1/projects/)
// is one of Anthropic's models' methods, and which: rawPredict,
// streamRawPredict, or count (rawPredict on the model count-tokens).
func vertexClaudePath(rest string) (method string, ok bool) {
	res, method, found := strings.Cut(rest, ":")
	segs := strings.Split(res, "/")
	if !found || len(segs) != 7 || segs[1] != "locations" || segs[3] != "publishers" || segs[4] != "anthropic" || segs[5] != "models" {
		return "", false
	}
	switch {
	case segs[6] == "count-tokens" && method == "rawPredict":
		return "count", true
	case method == "rawPredict", method == "streamRawPredict":
		return method, true
	}
	return "", false
}

// serveVertexClaude answers Claude on Vertex AI, as Anthropic's Vertex
// SDKs call it: rawPredict (streamRawPredict for a stream, whose body
// says stream true) with Anthropic's Messages body less model, with
// anthropic_version vertex-2023-10-16; count-tokens:rawPredict with the
// model in the body. Betas come in the anthropic-beta header. The answers
// and errors are Anthropic's, from the Anthropic format's own code; the
// model is the path's.
func serveVertexClaude(c *call, method string) {
	root := gjson.ParseBytes(c.body)
	if !validJSON(c.body) || !root.IsObject() {
		anthropicError(c.w, http.StatusBadRequest, "invalid_request_error", "the request body is not a JSON object")
		return
	}
	if v := root.Get("anthropic_version"); v.Str != vertexAnthropicVersion {
		anthropicError(c.w, http.StatusBadRequest, "invalid_request_error", "anthropic_version: Input should be '"+vertexAnthropicVersion+"'")
		return
	}
	body, _ := sjson.DeleteBytes(c.body, "anthropic_version")
	inner := *c
	if method == "count" {
		if root.Get("model").Type != gjson.String {
			anthropicError(c.w, http.StatusBadRequest, "invalid_request_error", "model: Field required")
			return
		}
		inner.body = body
		countTokens(&inner)
		return
	}
	if root.Get("model").Exists() {
		anthropicError(c.w, http.StatusBadRequest, "invalid_request_error", "model: Extra inputs are not permitted (the model is in the path)")
		return
	}
	if stream := root.Get("stream").Type == gjson.True; stream != (method == "streamRawPredict") {
		anthropicError(c.w, http.StatusBadRequest, "invalid_request_error", "stream: "+method+" takes stream "+map[bool]string{true: "false", false: "true"}[method == "rawPredict"])
		return
	}
	inner.body, _ = sjson.SetBytes(body, "model", c.model)
	serveMessages(&inner)
}
