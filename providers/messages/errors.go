package messages

import (
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Anthropic's error types (anthropic-sdk-go shared.ErrorType and the API's
// errors page).
const (
	typeInvalidRequest  = "invalid_request_error"
	typeAuthentication  = "authentication_error"
	typeBilling         = "billing_error"
	typePermission      = "permission_error"
	typeNotFound        = "not_found_error"
	typeRequestTooLarge = "request_too_large"
	typeRateLimit       = "rate_limit_error"
	typeAPI             = "api_error"
	typeTimeout         = "timeout_error"
	typeOverloaded      = "overloaded_error"
)

// ErrorStatus is the HTTP status a /v1/messages client gets for e: e's own
// status, or 500 when it has none. A 503 stays a 503 (with the type
// overloaded_error) rather than becoming Anthropic's non-standard 529:
// every proxy, log and metric knows 503, the Anthropic SDKs retry both
// alike, and the type tells an Anthropic client what it is.
func ErrorStatus(e *providers.Error) int {
	if e.Status < 400 || e.Status > 599 {
		return http.StatusInternalServerError
	}
	return e.Status
}

// ErrorType maps a unified error to Anthropic's error type, by status
// first, as Anthropic's API chooses it:
//
//	400 and other 4xx    invalid_request_error
//	401                  authentication_error
//	402                  billing_error
//	403                  permission_error
//	404                  not_found_error
//	413                  request_too_large
//	429                  rate_limit_error
//	503, 529             overloaded_error (the provider is overloaded)
//	504                  timeout_error
//	500, 502, other 5xx  api_error
//
// The unified type and code refine it where they say more than the status
// does: a server_error with code "overloaded" or "timeout" (as the
// anthropic translator maps those) keeps its meaning whatever the status.
func ErrorType(e *providers.Error) string {
	switch e.Code {
	case "overloaded":
		return typeOverloaded
	case "timeout":
		return typeTimeout
	}
	switch s := ErrorStatus(e); {
	case s == http.StatusUnauthorized:
		return typeAuthentication
	case s == http.StatusPaymentRequired:
		return typeBilling
	case s == http.StatusForbidden:
		return typePermission
	case s == http.StatusNotFound:
		return typeNotFound
	case s == http.StatusRequestEntityTooLarge:
		return typeRequestTooLarge
	case s == http.StatusTooManyRequests:
		return typeRateLimit
	case s == http.StatusServiceUnavailable || s == 529:
		return typeOverloaded
	case s == http.StatusGatewayTimeout:
		return typeTimeout
	case s >= 500:
		return typeAPI
	default:
		return typeInvalidRequest
	}
}

// ErrorMessage is the message a /v1/messages client sees for e. A context
// window overflow (code context_length_exceeded) is worded as Anthropic
// words it, "prompt is too long: …", which Anthropic's clients recognise
// (Claude Code compacts the conversation on it).
func ErrorMessage(e *providers.Error) string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(ErrorStatus(e))
	}
	if e.Code == "context_length_exceeded" && !strings.HasPrefix(strings.ToLower(msg), "prompt is too long") {
		msg = "prompt is too long: " + msg
	}
	return msg
}

// ErrorBody renders e in Anthropic's error shape:
//
//	{"type":"error","error":{"type":"invalid_request_error","message":"…"}}
//
// Send it with ErrorStatus(e).
func ErrorBody(e *providers.Error) []byte {
	return appendErrorJSON(make([]byte, 0, 80+len(e.Message)), e)
}

// appendErrorJSON appends the body of ErrorBody.
func appendErrorJSON(b []byte, e *providers.Error) []byte {
	w := jsonw.New(b)
	o := w.Object()
	o.Str("type", "error")
	eo := o.Object("error")
	eo.Str("type", ErrorType(e))
	eo.Str("message", ErrorMessage(e))
	eo.End()
	o.End()
	b, _ = w.Finish() // straight-line writing: no misuse
	return b
}

// AppendErrorEvent appends e as the event Anthropic ends a failed stream
// with, which the SDKs raise as an API error:
//
//	event: error
//	data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}
func AppendErrorEvent(dst []byte, e *providers.Error) []byte {
	dst = append(dst, "event: error\ndata: "...)
	dst = appendErrorJSON(dst, e)
	return append(dst, "\n\n"...)
}

// streamError turns the error object of a unified stream's error event,
// {"error":{"message","type","code"}}, into a providers.Error. The event
// has no status, so one is inferred from the type and code.
func streamError(obj gjson.Result) *providers.Error {
	e := &providers.Error{Type: "server_error"}
	switch {
	case obj.IsObject():
		e.Message = obj.Get("message").Str
		if t := obj.Get("type"); t.Type == gjson.String && t.Str != "" {
			e.Type = t.Str
		}
		switch c := obj.Get("code"); c.Type {
		case gjson.String:
			e.Code = c.Str
		case gjson.Number: // vLLM: the HTTP status
			if s := c.Int(); s >= 400 && s <= 599 {
				e.Status = int(s)
			}
		}
	case obj.Type == gjson.String:
		e.Message = obj.Str
	}
	if e.Message == "" {
		e.Message = "the provider reported an error in its stream"
	}
	if e.Status == 0 {
		e.Status = statusOf(e.Type, e.Code)
	}
	return e
}

// statusOf infers the status of an error that came without one.
func statusOf(typ, code string) int {
	switch code {
	case "rate_limit_exceeded", "insufficient_quota":
		return http.StatusTooManyRequests
	case "context_length_exceeded", "content_filter", "invalid_value", "unsupported_parameter":
		return http.StatusBadRequest
	case "overloaded":
		return http.StatusServiceUnavailable
	case "timeout":
		return http.StatusGatewayTimeout
	}
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "rate_limit_error", "tokens", "requests":
		return http.StatusTooManyRequests
	case "overloaded_error", "service_unavailable_error":
		return http.StatusServiceUnavailable
	case "timeout_error":
		return http.StatusGatewayTimeout
	default:
		return http.StatusInternalServerError
	}
}
