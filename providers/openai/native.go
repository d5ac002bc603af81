package openai

import (
	"net/http"

	"github.com/modelgate/modelgate/providers"
)

// Native passes OpenAI's own APIs through (the Responses API): the path
// under the base URL, the body with its model replaced.
type Native struct{}

// NativeRequest replaces the body's model; no client header is needed.
func (Native) NativeRequest(path string, body []byte, model string, _ http.Header) (providers.Request, error) {
	req, err := Chat{}.ChatRequest(body, model)
	req.Path = path
	return req, err
}

var _ providers.Native = Native{}
