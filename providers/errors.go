package providers

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/jsonw"
)

// Error is a failure in OpenAI's error shape:
//
//	{"error": {"message": "…", "type": "…", "param": null, "code": "…"}}
//
// Status is the HTTP status the client receives with it.
type Error struct {
	Status  int
	Type    string
	Code    string // empty is written as null
	Param   string // empty is written as null
	Message string

	// RetryAfter is how long the provider asked the client to wait before
	// trying again, when it said so in its body rather than in a
	// retry-after header (Google's google.rpc.RetryInfo, say). Zero: it did
	// not say. The host sends it as retry-after; it is not part of JSON.
	RetryAfter time.Duration
}

// StreamIncomplete is the error that ends a stream the provider closed
// cleanly before the answer was complete (before its last event: [DONE],
// message_stop, response.completed): without it a client could not tell a
// cut-off answer from a whole one. Every API's streams, translated or
// passed through, end with it in the API's own error event.
func StreamIncomplete() *Error {
	return &Error{Status: http.StatusBadGateway, Type: "server_error", Code: "stream_incomplete",
		Message: "the provider's stream ended before the answer was complete"}
}

// Error implements the error interface.
func (e *Error) Error() string { return e.Message }

// JSON returns the error's body.
func (e *Error) JSON() []byte {
	w := jsonw.New(make([]byte, 0, 96+len(e.Message)))
	e.Write(w.Value())
	b, _ := w.Finish() // straight-line writing: no misuse
	return b
}

// Write writes the error's body into v:
// {"error":{"message","type","param","code"}}, param and code null when
// empty.
func (e *Error) Write(v jsonw.Value) {
	o := v.Object()
	eo := o.Object("error")
	eo.Str("message", e.Message)
	eo.Str("type", e.Type)
	eo.StrOrNull("param", e.Param)
	eo.StrOrNull("code", e.Code)
	eo.End()
	o.End()
}

// InvalidParam is a 400 invalid_request_error about the field param.
func InvalidParam(param, format string, args ...any) *Error {
	return &Error{
		Status:  http.StatusBadRequest,
		Type:    "invalid_request_error",
		Code:    "invalid_value",
		Param:   param,
		Message: fmt.Sprintf(format, args...),
	}
}

// Unsupported is a 400 for a field the chosen provider cannot express.
func Unsupported(param, provider string) *Error {
	return UnsupportedBecause(param, fmt.Sprintf("%s is not supported by provider type %s", param, provider))
}

// UnsupportedBecause is Unsupported with a message of its own, one that
// says why the provider cannot express param or what to do instead.
func UnsupportedBecause(param, message string) *Error {
	return &Error{
		Status:  http.StatusBadRequest,
		Type:    "invalid_request_error",
		Code:    "unsupported_parameter",
		Param:   param,
		Message: message,
	}
}

// TypeForStatus is the error type OpenAI's SDKs expect for a status.
func TypeForStatus(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

// StatusText names an HTTP status for messages: "502 Bad Gateway", or
// "status 599" for a status without a name.
func StatusText(status int) string {
	if t := http.StatusText(status); t != "" {
		return strconv.Itoa(status) + " " + t
	}
	return "status " + strconv.Itoa(status)
}

// ErrorTypeMessage reads the type and message of a provider's error body
// in the shapes Anthropic and Cohere use: {"error":{"type","message"}},
// {"error":"…"} or {"message":"…"}. A body that is not JSON (an HTML page
// from a proxy) gives neither.
func ErrorTypeMessage(body []byte) (typ, message string) {
	if !ValidJSON(body) {
		return "", ""
	}
	root := gjson.ParseBytes(body)
	switch e := root.Get("error"); {
	case e.IsObject():
		return e.Get("type").Str, e.Get("message").Str
	case e.Type == gjson.String:
		return "", e.Str
	default:
		return "", root.Get("message").Str
	}
}

// ErrorFromBody maps a provider's error body to a unified error with the
// given status. It reads OpenAI's shape and its common variants ({"error":
// "…"}, {"message": "…"} as Cohere sends, {"detail": "…"} from FastAPI
// servers, integer codes from vLLM) and never copies a body that is not JSON
// (an HTML page from a proxy, say).
func ErrorFromBody(status int, body []byte) *Error {
	e := &Error{Status: status, Type: TypeForStatus(status)}
	var msg gjson.Result
	if ValidJSON(body) {
		root := gjson.ParseBytes(body)
		eo := root.Get("error")
		switch {
		case eo.IsObject():
			msg = eo.Get("message")
			if t := eo.Get("type"); t.Type == gjson.String && t.Str != "" {
				e.Type = t.Str
			}
			switch c := eo.Get("code"); c.Type {
			case gjson.String:
				e.Code = c.Str
			case gjson.Number:
				if c.Int() != int64(status) {
					e.Code = c.Raw
				}
			}
			if p := eo.Get("param"); p.Type == gjson.String {
				e.Param = p.Str
			}
		case eo.Type == gjson.String:
			msg = eo
		default:
			msg = root.Get("message")
			if !msg.Exists() {
				msg = root.Get("detail")
			}
		}
	}
	if msg.Type == gjson.String && msg.Str != "" {
		e.Message = msg.Str
	} else if t := http.StatusText(status); t != "" {
		e.Message = "the provider answered " + t
	} else {
		e.Message = "the provider answered status " + strconv.Itoa(status)
	}
	return e
}
