package gateway

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/modelgate/modelgate/providers"
)

// NotFound is a 404 invalid_request_error about param (may be empty).
func NotFound(param, msg string) *providers.Error {
	return &providers.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Param: param, Message: msg}
}

func notFound(param, msg string) *providers.Error { return NotFound(param, msg) }

// ModelNotFound is the 404 OpenAI gives for a model it does not know.
func ModelNotFound(model string) *providers.Error {
	e := NotFound("model", fmt.Sprintf("the model %q does not exist or you do not have access to it", model))
	e.Code = "model_not_found"
	return e
}

func modelNotFound(model string) *providers.Error { return ModelNotFound(model) }

// modelNotAllowed is the 403 for a key limited to other models.
func modelNotAllowed(model string) *providers.Error {
	return &providers.Error{
		Status: http.StatusForbidden, Type: "invalid_request_error", Code: "model_not_allowed", Param: "model",
		Message: fmt.Sprintf("this API key may not use the model %q", model),
	}
}

// AsProviderError returns err as a unified error; anything that is not one
// already is an internal error whose text stays in the server.
func AsProviderError(err error) *providers.Error {
	var pe *providers.Error
	if errors.As(err, &pe) {
		return pe
	}
	return &providers.Error{Status: http.StatusInternalServerError, Type: "server_error",
		Message: "the request could not be translated"}
}

func asProviderError(err error) *providers.Error { return AsProviderError(err) }

// AccountSuspended is the 403 of a call whose key's account is suspended
// or deleted.
func AccountSuspended() *providers.Error {
	return &providers.Error{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "account_suspended",
		Message: "the account this API key belongs to is suspended: ask the gateway's operator"}
}
