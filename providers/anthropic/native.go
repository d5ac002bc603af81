package anthropic

import (
	"net/http"

	"github.com/tidwall/sjson"

	"github.com/modelgate/modelgate/providers"
)

// Native passes Anthropic's Messages API through (POST /v1/messages and
// /v1/messages/count_tokens): the body with only its model replaced, the
// client's anthropic-version (else Version, else DefaultVersion) and
// anthropic-beta headers.
type Native struct {
	// Version is the anthropic-version sent when the client sends none.
	Version string
}

// NativeRequest writes the pass-through request.
func (n Native) NativeRequest(path string, body []byte, model string, h http.Header) (providers.Request, error) {
	req := providers.Request{Path: "/v1" + path, Body: body, Header: make(http.Header, 2)}
	if model != "" {
		b, err := sjson.SetBytes(body, "model", model)
		if err != nil {
			return req, err
		}
		req.Body = b
	}
	v := h.Get("Anthropic-Version")
	if v == "" {
		if v = n.Version; v == "" {
			v = DefaultVersion
		}
	}
	req.Header["Anthropic-Version"] = []string{v}
	if beta := h.Values("Anthropic-Beta"); len(beta) > 0 {
		req.Header["Anthropic-Beta"] = beta
	}
	return req, nil
}

var _ providers.Native = Native{}
