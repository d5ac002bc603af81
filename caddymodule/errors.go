package caddymodule

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"

	"github.com/modelgate/modelgate/providers"
)

// writeError writes e in OpenAI's error shape. Every error modelgate sends
// goes through here, so clients never see an empty or HTML error body.
func writeError(w http.ResponseWriter, e *providers.Error) {
	body := e.JSON()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Del("Content-Encoding")
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// modelgateApp returns this config's modelgate app, or an error that tells
// the user to configure it.
func modelgateApp(ctx caddy.Context) (*App, error) {
	v, err := ctx.AppIfConfigured("modelgate")
	if errors.Is(err, caddy.ErrNotConfigured) {
		return nil, errors.New("the modelgate app is not configured: add the modelgate global option")
	}
	if err != nil {
		return nil, err
	}
	return v.(*App), nil
}
