// Package bedrock translates modelgate's unified (OpenAI-shaped) chat
// completions to and from Amazon Bedrock's Converse API: Converse (POST
// /model/{modelId}/converse) and ConverseStream (POST
// /model/{modelId}/converse-stream), whose answer is AWS's binary event
// stream (application/vnd.amazon.eventstream) rather than server-sent events.
//
// The wire format follows the official aws-sdk-go-v2 service/bedrockruntime
// (its schemas, types and restJson1 protocol): JSON member names, the model
// id escaped into the path as the SDK escapes HTTP labels, error types taken
// from the x-amzn-ErrorType header. Event-stream messages are decoded with
// the SDK's own eventstream.Decoder (headers, prelude and message CRCs);
// this package only reads a message's total length from its prelude to know
// when a whole message has arrived (see EventStream).
//
// Embeddings translates embeddings requests to InvokeModel (POST
// /model/{modelId}/invoke) for Amazon Titan Text Embeddings and Cohere
// Embed (see Embeddings).
//
// Like every translator it works on bytes: it reads JSON with gjson and
// writes it by appending. Signing requests (SigV4) is the host's job.
package bedrock

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// providerName names the provider type in unsupported-parameter errors.
const providerName = "bedrock"

// Structured output modes (Chat.StructuredOutput).
const (
	// StructuredNative sends response_format json_schema as Converse's
	// outputConfig.textFormat, Bedrock's own structured output, which
	// constrains decoding on the models Bedrock lists for it (Claude 4.5 and
	// later, Nova, and several open-weight families).
	StructuredNative = "native"

	// StructuredTool sends it as a forced tool whose input schema is the
	// schema; the tool's input becomes the message content. For models
	// without native structured output but with tool choice.
	StructuredTool = "tool"
)

// JSONToolName is the tool that carries a structured answer when
// response_format is json_object, or json_schema in StructuredTool mode.
// Its calls come back as the message content, never as tool calls, so a
// client's own tool may not have this name.
const JSONToolName = "json_tool_call"

// Chat is the translator for Bedrock's Converse API. The zero value is ready
// to use, and a Chat is safe for concurrent use.
type Chat struct {
	// StructuredOutput is how response_format json_schema reaches the
	// model: StructuredNative (the default, also for "") or StructuredTool.
	// json_object always uses the forced tool: Bedrock's native format
	// needs a closed schema.
	StructuredOutput string

	// BaseModels names, for a model id that does not say which model it
	// is (an application inference profile or provisioned throughput
	// ARN), the model id it stands for, such as
	// "anthropic.claude-sonnet-4-5-20250929-v1:0": its family decides
	// the reasoning configuration and whether signed reasoning goes back.
	// Keys are the model as the translator gets it.
	BaseModels map[string]string

	// Now returns the time for "created"; nil means time.Now.
	Now func() time.Time

	// NewID returns the id of an answer, which Converse does not give;
	// nil means "chatcmpl-" and 24 random hex digits.
	NewID func() string
}

var _ providers.Chat = Chat{}

func (c Chat) now() time.Time { return providers.Now(c.Now) }

func (c Chat) newID() string {
	if c.NewID != nil {
		return c.NewID()
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "chatcmpl-" + hex.EncodeToString(b[:])
}

// Path returns the Converse (stream false) or ConverseStream path for a
// model id, escaped as aws-sdk-go-v2 escapes an HTTP label: every byte but
// A-Z, a-z, 0-9, '-', '.', '_' and '~' becomes %XX, so ':' and '/' in ARNs
// and versioned ids are escaped and nothing in the id can add a path
// segment or a query. The ids "." and "..", which would still name a
// segment, are refused, as is the empty id.
func Path(model string, stream bool) (string, error) {
	if stream {
		return modelPath(model, "converse-stream")
	}
	return modelPath(model, "converse")
}

// InvokePath returns the InvokeModel path for a model id
// (/model/{modelId}/invoke), escaped as Path escapes it.
func InvokePath(model string) (string, error) { return modelPath(model, "invoke") }

// modelPath returns /model/{escaped model}/{op}.
func modelPath(model, op string) (string, error) {
	if model == "" || model == "." || model == ".." {
		return "", providers.InvalidParam("model", "%q is not a Bedrock model id", model)
	}
	if len(model) > maxModelID {
		return "", providers.InvalidParam("model", "a Bedrock model id has at most %d characters", maxModelID)
	}
	b := make([]byte, 0, len("/model//")+len(op)+3*len(model))
	b = append(b, "/model/"...)
	b = appendEscaped(b, model)
	b = append(b, '/')
	b = append(b, op...)
	return string(b), nil
}

// maxModelID is the length limit of Converse's modelId.
const maxModelID = 2048

// appendEscaped appends s with every byte outside the unreserved set
// escaped as %XX (upper-case hex), as smithy-go's httpbinding.EscapePath
// does for labels.
func appendEscaped(b []byte, s string) []byte {
	const upperHex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' {
			b = append(b, c)
			continue
		}
		b = append(b, '%', upperHex[c>>4], upperHex[c&0xf])
	}
	return b
}

// Error maps a Bedrock error answer to the unified error. The error type
// comes from the x-amzn-ErrorType header (e.g.
// "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
// else from the body's "__type" or "code", as smithy-go's restJson1
// protocol reads it; the message from the body's "message". A body that is
// not JSON never reaches the message.
func (Chat) Error(status int, header http.Header, body []byte) *providers.Error {
	typ := header.Get("X-Amzn-Errortype")
	var msg string
	if providers.ValidJSON(body) {
		root := gjson.ParseBytes(body)
		if typ == "" {
			typ = root.Get("__type").Str
		}
		if typ == "" {
			typ = root.Get("code").Str
		}
		msg = root.Get("message").Str
		if msg == "" {
			msg = root.Get("Message").Str
		}
	}
	if msg == "" {
		msg = "the provider answered " + providers.StatusText(status)
	}
	return mapError(status, sanitizeErrorCode(typ), msg)
}

// sanitizeErrorCode strips a namespace ("com.amazon.coral.service#") and a
// URI suffix (":http://…") from an error type, as smithy-go does.
func sanitizeErrorCode(code string) string {
	if i := strings.IndexByte(code, ':'); i >= 0 {
		code = code[:i]
	}
	if i := strings.IndexByte(code, '#'); i >= 0 {
		code = code[i+1:]
	}
	return code
}

// mapError builds the unified error for a Bedrock exception type (as
// named in an error answer, "ThrottlingException", or in a stream's
// :exception-type header, "throttlingException") that came with status;
// status 0 means the type's own status (a stream exception has none).
func mapError(status int, typ, msg string) *providers.Error {
	e := &providers.Error{Status: status, Message: msg}
	switch strings.ToLower(typ) {
	case "throttlingexception":
		e.Status, e.Type, e.Code = http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded"
	case "servicequotaexceededexception":
		e.Status, e.Type, e.Code = http.StatusTooManyRequests, "rate_limit_error", "quota_exceeded"
	case "validationexception":
		e.Status, e.Type = http.StatusBadRequest, "invalid_request_error"
		if contextTooLong(msg) {
			e.Code = "context_length_exceeded"
		}
	case "modeltimeoutexception":
		e.Status, e.Type, e.Code = http.StatusGatewayTimeout, "server_error", "timeout"
	case "serviceunavailableexception":
		e.Status, e.Type, e.Code = http.StatusServiceUnavailable, "server_error", "service_unavailable"
	case "modelnotreadyexception":
		e.Status, e.Type, e.Code = http.StatusServiceUnavailable, "server_error", "model_not_ready"
	case "modelerrorexception", "modelstreamerrorexception":
		e.Status, e.Type, e.Code = http.StatusBadGateway, "server_error", "model_error"
	case "internalserverexception":
		e.Status, e.Type, e.Code = http.StatusInternalServerError, "server_error", "internal_server_error"
	case "resourcenotfoundexception":
		e.Status, e.Type, e.Code = http.StatusNotFound, "invalid_request_error", "model_not_found"
	case "accessdeniedexception":
		if e.Status == 0 {
			e.Status = http.StatusForbidden
		}
		e.Type, e.Code = providers.TypeForStatus(e.Status), "access_denied"
	default:
		// Authentication failures (UnrecognizedClientException,
		// InvalidSignatureException, ExpiredTokenException, …) keep their
		// 403 so the host treats them as its own credentials' fault; new
		// types keep whatever status they came with.
		if e.Status == 0 {
			e.Status = http.StatusInternalServerError
		}
		e.Type = providers.TypeForStatus(e.Status)
	}
	return e
}

// contextPhrases are the wordings, lower-cased, of Bedrock's
// ValidationExceptions for a prompt too long for the model, as Converse
// and the models behind it phrase them.
var contextPhrases = []string{
	"input is too long",
	"prompt is too long",
	"too many input tokens",
	"too many total text bytes",
	"maximum context length",
	"context window",
	"context length",
	"exceeds the maximum number of tokens",
	"input tokens exceed",
	"too large for model with",
}

// contextTooLong reports whether a ValidationException's message says the
// input does not fit the model's context.
func contextTooLong(msg string) bool {
	m := strings.ToLower(msg)
	for _, p := range contextPhrases {
		if strings.Contains(m, p) {
			return true
		}
	}
	return false
}

// finishReason maps a Converse stopReason to OpenAI's finish_reason.
// Unknown and missing reasons, and the malformed_* reasons (the model's
// output could not be read; OpenAI has no word for it), become "stop".
func finishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "guardrail_intervened", "content_filtered":
		return "content_filter"
	default: // end_turn, stop_sequence, malformed_model_output, malformed_tool_use, new reasons
		return "stop"
	}
}

// finalFinish corrects the mapped finish reason by what the answer held:
// tool calls make "tool_calls" of a plain stop (some models end a turn of
// calls with end_turn), and a turn whose only call was the structured
// output tool is a "stop".
func finalFinish(finish string, calls, jsonCalls int) string {
	switch {
	case finish == "stop" && calls > 0:
		return "tool_calls"
	case finish == "tool_calls" && calls == 0 && jsonCalls > 0:
		return "stop"
	}
	return finish
}
