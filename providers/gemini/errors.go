package gemini

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// Error maps a Google error answer, {"error":{"code","message","status",
// "details"}} (sometimes wrapped in an array), to the unified error:
//
//   - RESOURCE_EXHAUSTED: 429 rate_limit_error, with the delay of a
//     google.rpc.RetryInfo detail in RetryAfter;
//   - INVALID_ARGUMENT about the input token limit: 400
//     context_length_exceeded; about the API key (ErrorInfo reason
//     API_KEY_INVALID, which Google sends as 400): 502
//     upstream_auth_failed, as the host answers a provider's 401 and 403:
//     the key is the gateway's, and a 401 would tell the client its own
//     key was wrong;
//   - UNAVAILABLE 503, DEADLINE_EXCEEDED 504, INTERNAL 500: server_error;
//   - NOT_FOUND: 404 model_not_found; PERMISSION_DENIED 403 and
//     UNAUTHENTICATED 401 keep their status.
//
// A body that is not JSON (an HTML page from a proxy, say) never reaches
// the message.
func (Chat) Error(status int, _ http.Header, body []byte) *providers.Error {
	var e gjson.Result
	if providers.ValidJSON(body) {
		// ParseBytes copies: the error's message outlives the body.
		root := gjson.ParseBytes(body)
		if root.IsArray() {
			root = root.Get("0")
		}
		e = root.Get("error")
		if !e.IsObject() && root.Get("message").Type == gjson.String {
			e = root
		}
	}
	return mapError(status, e)
}

// mapError builds the unified error for a Google error object (possibly
// absent) that came with status (0 inside a stream, where the object's
// code or status stands in).
func mapError(status int, e gjson.Result) *providers.Error {
	var code, msg string
	var details gjson.Result
	if e.IsObject() {
		code = e.Get("status").Str
		msg = e.Get("message").Str
		details = e.Get("details")
		if status == 0 {
			if c := e.Get("code"); c.Type == gjson.Number && c.Int() >= 400 && c.Int() <= 599 {
				status = int(c.Int())
			}
		}
	} else if e.Type == gjson.String {
		msg = e.Str
	}
	if status == 0 {
		status = statusOf(code)
	}
	out := &providers.Error{Status: status, Message: msg}
	if out.Message == "" {
		out.Message = "the provider answered " + providers.StatusText(status)
	}

	switch code {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		switch {
		case reason(details) == "API_KEY_INVALID":
			out.Status, out.Code = http.StatusBadGateway, "upstream_auth_failed"
			out.Message = "the provider rejected the gateway's API key (API_KEY_INVALID)"
		case contextLength(msg):
			out.Code, out.Param = "context_length_exceeded", "messages"
		default:
			out.Code = strings.ToLower(code)
		}
	case "RESOURCE_EXHAUSTED":
		out.Code = "rate_limit_exceeded"
		out.RetryAfter = retryDelay(details)
	case "NOT_FOUND":
		out.Code = "model_not_found"
	case "UNAVAILABLE":
		out.Code = "service_unavailable"
	case "DEADLINE_EXCEEDED":
		out.Code = "timeout"
	case "CANCELLED":
		// Google's 499: the request was cancelled on its side, not by
		// the client of the gateway.
		out.Status, out.Code = http.StatusBadGateway, "cancelled"
	case "":
	default: // UNAUTHENTICATED, PERMISSION_DENIED, INTERNAL, UNKNOWN, …
		out.Code = strings.ToLower(code)
	}
	if out.Status < 400 || out.Status > 599 {
		out.Status = http.StatusBadGateway
	}
	out.Type = providers.TypeForStatus(out.Status)
	return out
}

// statusOf is the HTTP status of a google.rpc.Code name.
func statusOf(code string) int {
	switch code {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return http.StatusBadRequest
	case "UNAUTHENTICATED":
		return http.StatusUnauthorized
	case "PERMISSION_DENIED":
		return http.StatusForbidden
	case "NOT_FOUND":
		return http.StatusNotFound
	case "ALREADY_EXISTS", "ABORTED":
		return http.StatusConflict
	case "RESOURCE_EXHAUSTED":
		return http.StatusTooManyRequests
	case "CANCELLED":
		return 499
	case "UNIMPLEMENTED":
		return http.StatusNotImplemented
	case "UNAVAILABLE":
		return http.StatusServiceUnavailable
	case "DEADLINE_EXCEEDED":
		return http.StatusGatewayTimeout
	default: // INTERNAL, UNKNOWN, DATA_LOSS, none
		return http.StatusInternalServerError
	}
}

// contextLength reports whether an INVALID_ARGUMENT message is about the
// input exceeding the model's token limit: the Developer API's "The input
// token count (…) exceeds the maximum number of tokens allowed (…)", and
// Vertex AI's "Unable to submit request because the input token count is …
// but model only supports up to …".
func contextLength(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "exceeds the maximum number of tokens") ||
		strings.Contains(m, "input token count") && (strings.Contains(m, "exceed") || strings.Contains(m, "supports up to"))
}

// reason returns the reason of a google.rpc.ErrorInfo detail.
func reason(details gjson.Result) string {
	var r string
	details.ForEach(func(_, d gjson.Result) bool {
		if strings.HasSuffix(d.Get("@type").Str, "google.rpc.ErrorInfo") {
			r = d.Get("reason").Str
			return false
		}
		return true
	})
	return r
}

// maxRetryDelay caps a RetryInfo delay: past two minutes the OpenAI Python
// SDK gives up instead of waiting.
const maxRetryDelay = 2 * time.Minute

// retryDelay reads the retryDelay of a google.rpc.RetryInfo detail, a
// protobuf Duration in JSON ("21s", "0.5s"); 0 when there is none.
func retryDelay(details gjson.Result) time.Duration {
	var d time.Duration
	details.ForEach(func(_, detail gjson.Result) bool {
		if !strings.HasSuffix(detail.Get("@type").Str, "google.rpc.RetryInfo") {
			return true
		}
		v := detail.Get("retryDelay")
		switch {
		case v.Type == gjson.String && strings.HasSuffix(v.Str, "s"):
			if secs, err := strconv.ParseFloat(strings.TrimSuffix(v.Str, "s"), 64); err == nil && secs > 0 {
				d = time.Duration(min(secs, maxRetryDelay.Seconds()) * float64(time.Second))
			}
		case v.IsObject(): // {"seconds": "21", "nanos": 5e8}, the proto form
			secs := float64(v.Get("seconds").Int()) + float64(v.Get("nanos").Int())/1e9
			if secs > 0 {
				d = time.Duration(min(secs, maxRetryDelay.Seconds()) * float64(time.Second))
			}
		}
		return false
	})
	return d
}
