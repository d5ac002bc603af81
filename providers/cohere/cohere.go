// Package cohere translates modelgate's unified (OpenAI-shaped) chat
// completions to and from Cohere's Chat API v2 (POST /v2/chat): request
// bodies, answers, server-sent event streams and errors; and unified
// embeddings to and from its Embed API v2 (POST /v2/embed, see Embeddings).
// Cohere's rerank is a row of package providers/rerank.
//
// The wire format is the one Cohere's official SDKs (cohere-go/v2,
// cohere-python) define. Like every translator it works on bytes: it reads
// JSON with gjson and writes it by appending, copying raw JSON values through
// where it can.
//
// Choices where the two APIs differ:
//
//   - Cohere's tool_plan (the short text a model writes before its tool
//     calls) becomes the message content, as a preamble before tool calls
//     is in OpenAI's API, and an assistant message's text goes back to
//     Cohere as tool_plan when the message carries tool calls. So the plan
//     survives a tool loop through clients that keep only content and
//     tool_calls (openai-go's ToParam, LangChain, …).
//   - Thinking content (reasoning models such as command-a-reasoning)
//     becomes reasoning_content, and reasoning_content (or reasoning) on an
//     assistant message goes back as a thinking content item.
//   - A finish reason of ERROR or TIMEOUT is an error, not a silent stop:
//     the answer is incomplete.
package cohere

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// providerName names the provider type in unsupported-parameter errors.
const providerName = "cohere"

// Path is the chat endpoint, relative to the provider's base URL
// (https://api.cohere.com).
const Path = "/v2/chat"

// Chat is the translator for Cohere's Chat API v2. The zero value is ready
// to use, and a Chat is safe for concurrent use.
type Chat struct {
	// Now returns the time for "created"; nil means time.Now.
	Now func() time.Time
}

var _ providers.Chat = Chat{}

func (c Chat) now() time.Time { return providers.Now(c.Now) }

// Error maps a Cohere error answer, {"message": "…"} with the status that
// says what went wrong, into the unified error (the host answers a 401 or
// 403 from any provider itself). The statuses are those
// cohere-go decodes for /v2/chat: 400, 401, 402, 403, 404, 422, 429, 498
// (invalid token), 499 (request cancelled), 500, 501, 503 and 504. A body
// that is not JSON (an HTML page from a proxy) never reaches the message.
func (Chat) Error(status int, _ http.Header, body []byte) *providers.Error {
	_, msg := providers.ErrorTypeMessage(body)
	if msg == "" {
		msg = "the provider answered " + statusText(status)
	}
	return mapError(status, msg)
}

// mapError builds the unified error for a Cohere status and message.
func mapError(status int, msg string) *providers.Error {
	e := &providers.Error{Status: status, Type: providers.TypeForStatus(status), Message: msg}
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		if contextTooLong(msg) {
			e.Status, e.Type, e.Code = http.StatusBadRequest, "invalid_request_error", "context_length_exceeded"
		} else if status == http.StatusRequestEntityTooLarge {
			e.Code = "request_too_large"
		}
	case http.StatusUnauthorized:
		e.Type, e.Code = "authentication_error", "invalid_api_key"
	case 498:
		// Cohere's "invalid token": the gateway's own key was refused. As
		// the gateway answers a provider's 401, the client gets a 502 that
		// does not repeat the provider's message (which may quote the key).
		e.Status, e.Type, e.Code = http.StatusBadGateway, "server_error", "upstream_auth_failed"
		e.Message = "the provider rejected the gateway's credentials (498 Invalid Token)"
	case http.StatusPaymentRequired:
		e.Type, e.Code = "insufficient_quota", "insufficient_quota"
	case http.StatusNotFound:
		if strings.Contains(strings.ToLower(msg), "model") {
			e.Code = "model_not_found"
		}
	case http.StatusTooManyRequests:
		e.Code = "rate_limit_exceeded"
	case 499: // Cohere saw the request cancelled
		e.Type, e.Code = "server_error", "request_cancelled"
	case http.StatusNotImplemented:
		e.Code = "not_implemented"
	case http.StatusServiceUnavailable:
		e.Code = "service_unavailable"
	case http.StatusGatewayTimeout:
		e.Code = "timeout"
	}
	return e
}

// contextTooLong reports whether an error message says the prompt (and
// max_tokens) do not fit the model's context: Cohere words it "too many
// tokens: …".
func contextTooLong(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "too many tokens") || strings.Contains(m, "context length") ||
		strings.Contains(m, "context window")
}

// statusText names an HTTP status for messages, including Cohere's own.
func statusText(status int) string {
	switch status {
	case 498:
		return "498 Invalid Token"
	case 499:
		return "499 Client Closed Request"
	}
	return providers.StatusText(status)
}

// finishReason maps a Cohere finish_reason to OpenAI's. ok is false for
// ERROR and TIMEOUT, which end an incomplete answer: the caller reports an
// error instead. Unknown and missing reasons become "stop".
func finishReason(r string) (reason string, ok bool) {
	switch r {
	case "MAX_TOKENS":
		return "length", true
	case "TOOL_CALL":
		return "tool_calls", true
	case "ERROR", "TIMEOUT":
		return "", false
	default: // COMPLETE, STOP_SEQUENCE, null, new reasons
		return "stop", true
	}
}

// generationError is the error for an answer Cohere ended with finish_reason
// ERROR or TIMEOUT; detail is the error text Cohere gave, if any.
func generationError(reason, detail string) *providers.Error {
	e := &providers.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "generation_error",
		Message: "the provider stopped generating with an error"}
	if reason == "TIMEOUT" {
		e.Status, e.Code, e.Message = http.StatusGatewayTimeout, "timeout", "the provider timed out while generating"
	}
	if detail != "" {
		e.Message += ": " + detail
	}
	return e
}

// usage is Cohere's token accounting.
type usage struct {
	input, output, cached int64
	haveCached            bool
}

// set reads a Cohere usage object: tokens (what the model processed) or,
// where tokens are missing, billed_units, plus cached_tokens. Counts are
// numbers that the SDKs type as floats; they are rounded.
func (u *usage) set(v gjson.Result) {
	if !v.IsObject() {
		return
	}
	in, out := v.Get("tokens.input_tokens"), v.Get("tokens.output_tokens")
	if in.Type != gjson.Number {
		in = v.Get("billed_units.input_tokens")
	}
	if out.Type != gjson.Number {
		out = v.Get("billed_units.output_tokens")
	}
	if in.Type == gjson.Number {
		u.input = count(in.Num)
	}
	if out.Type == gjson.Number {
		u.output = count(out.Num)
	}
	if c := v.Get("cached_tokens"); c.Type == gjson.Number {
		u.cached, u.haveCached = count(c.Num), true
	}
}

// count turns a token count as Cohere sends it into a non-negative integer.
func count(f float64) int64 {
	if !(f > 0) { // negative or NaN
		return 0
	}
	if f >= 1<<53 {
		return 1 << 53
	}
	return int64(math.Round(f))
}

// unified is the unified usage.
func (u *usage) unified() providers.Usage {
	return providers.Usage{
		Prompt: u.input, Completion: u.output, Total: u.input + u.output,
		Cached: u.cached, HasCached: u.haveCached,
	}
}

// writeLogprob writes one entry of OpenAI's logprobs.content for a
// Cohere logprob item {text, token_ids, logprobs}. Cohere scores a text
// chunk token by token without naming each token's text, so the entry is
// the chunk: its text as the token, the sum of its tokens' log
// probabilities (the chunk's log probability), its UTF-8 bytes, and no
// alternatives (Cohere reports none).
func writeLogprob(a jsonw.Array, item gjson.Result) {
	text := item.Get("text")
	sum := 0.0
	item.Get("logprobs").ForEach(func(_, lp gjson.Result) bool {
		if lp.Type == gjson.Number {
			sum += lp.Num
		}
		return true
	})
	if math.IsNaN(sum) || math.IsInf(sum, 0) {
		sum = -9999 // OpenAI's floor for a token outside the top 20
	}
	o := a.Object()
	o.Text("token", jsonw.StrOf(text))
	o.Float("logprob", sum)
	bytes := o.Array("bytes")
	for i := 0; i < len(text.Str); i++ {
		bytes.Int(int64(text.Str[i]))
	}
	bytes.End()
	o.Array("top_logprobs").End()
	o.End()
}

// writeLogprobs writes the logprobs object {"content":[…],"refusal":null}
// for Cohere's logprob items, each one written by item.
func writeLogprobs(v jsonw.Value, items gjson.Result) {
	o := v.Object()
	content := o.Array("content")
	items.ForEach(func(_, item gjson.Result) bool {
		writeLogprob(content, item)
		return true
	})
	content.End()
	o.Null("refusal")
	o.End()
}

// base62 are the characters of generated tool call ids.
const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// callID is a generated tool call id, "call_" and 24 random base62
// characters, for a tool call Cohere sent without one.
type callID [len("call_") + 24]byte

// newCallID makes a callID.
func newCallID() callID {
	var id callID
	copy(id[:], "call_")
	for i := len("call_"); i < len(id); i++ {
		id[i] = base62[rand.IntN(len(base62))]
	}
	return id
}
