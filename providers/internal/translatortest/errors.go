package translatortest

import (
	"errors"
	"net/http"
	"testing"

	"github.com/modelgate/modelgate/providers"
)

// ChatRequestError checks that body passes providers.ValidateChat and that
// c refuses it for model with a 400 invalid_request_error naming param
// and code, and saying why.
func ChatRequestError(t testing.TB, c providers.Chat, body, model, param, code string) {
	t.Helper()
	if _, err := providers.ValidateChat([]byte(body)); err != nil {
		t.Fatalf("the input does not pass ValidateChat: %v", err)
	}
	_, err := c.ChatRequest([]byte(body), model)
	var e *providers.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want a *providers.Error", err)
	}
	if e.Status != http.StatusBadRequest || e.Type != "invalid_request_error" ||
		e.Param != param || e.Code != code || e.Message == "" {
		t.Errorf("got %s (status %d), want status 400, param %q, code %q", e.JSON(), e.Status, param, code)
	}
}
