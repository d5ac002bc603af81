package providertest

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/modelgate/modelgate/providers/sse"
)

// bedrockAnthropicVersion is the anthropic_version a Messages body must
// carry on Bedrock.
const bedrockAnthropicVersion = "bedrock-2023-05-31"

// isBedrockClaude reports whether a Bedrock model id names one of
// Anthropic's models (a model id, an inference profile or an ARN ending in
// one), which InvokeModel serves with Anthropic's Messages body.
func isBedrockClaude(model string) bool {
	id := model
	if i := strings.LastIndexByte(id, '/'); strings.HasPrefix(id, "arn:") && i >= 0 {
		id = id[i+1:]
	}
	return strings.HasPrefix(id, "anthropic.") || strings.Contains(id, ".anthropic.")
}

// serveBedrockMessages answers InvokeModel (stream false) and
// InvokeModelWithResponseStream for a Claude model: the body is
// Anthropic's Messages body with anthropic_version bedrock-2023-05-31 and
// the betas in anthropic_beta, without model and stream, which Bedrock
// refuses (the path names both). The answer is Anthropic's message, or
// each of Anthropic's stream events as the base64 "bytes" of an
// event-stream chunk event, message_stop with Bedrock's invocation
// metrics; an error event becomes an exception message.
func serveBedrockMessages(c *call, stream bool) {
	root := gjson.ParseBytes(c.body)
	if !validJSON(c.body) || !root.IsObject() {
		bedrockError(c.w, http.StatusBadRequest, "ValidationException", "Malformed input request, please reformat your input and try again.")
		return
	}
	switch v := root.Get("anthropic_version"); {
	case !v.Exists():
		bedrockError(c.w, http.StatusBadRequest, "ValidationException", "Malformed input request: #: required key [anthropic_version] not found, please reformat your input and try again.")
		return
	case v.Str != bedrockAnthropicVersion:
		bedrockError(c.w, http.StatusBadRequest, "ValidationException", "invalid anthropic_version: "+v.Raw)
		return
	}
	for _, k := range []string{"model", "stream"} {
		if root.Get(k).Exists() {
			bedrockError(c.w, http.StatusBadRequest, "ValidationException", "Malformed input request: #: extraneous key ["+k+"] is not permitted, please reformat your input and try again.")
			return
		}
	}
	if b := root.Get("anthropic_beta"); b.Exists() {
		ok := b.IsArray()
		for _, s := range b.Array() {
			ok = ok && s.Type == gjson.String
		}
		if !ok {
			bedrockError(c.w, http.StatusBadRequest, "ValidationException", "Malformed input request: #/anthropic_beta: expected type: JSONArray of strings, please reformat your input and try again.")
			return
		}
	}
	body, _ := sjson.DeleteBytes(c.body, "anthropic_version")
	body, _ = sjson.DeleteBytes(body, "anthropic_beta")
	body, _ = sjson.SetBytes(body, "model", c.model)
	if stream {
		body, _ = sjson.SetBytes(body, "stream", true)
	}
	inner := *c
	inner.body = body
	inner.w = &bedrockMessagesWriter{w: c.w}
	serveMessages(&inner)
}

// bedrockMessagesWriter takes Anthropic's answer and writes Bedrock's:
// an error in Bedrock's shape, a stream as event-stream messages.
type bedrockMessagesWriter struct {
	w       http.ResponseWriter
	status  int
	stream  bool
	pending []byte
	enc     *eventstream.Encoder
	buf     bytes.Buffer
}

func (b *bedrockMessagesWriter) Header() http.Header { return b.w.Header() }

func (b *bedrockMessagesWriter) WriteHeader(status int) {
	b.status = status
	h := b.w.Header()
	if status == http.StatusOK && strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		b.stream = true
		b.enc = eventstream.NewEncoder()
		h.Set("Content-Type", "application/vnd.amazon.eventstream")
		h.Del("Cache-Control")
	}
	if status >= 400 {
		return // written with the body, in Bedrock's shape
	}
	b.w.WriteHeader(status)
}

func (b *bedrockMessagesWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.WriteHeader(http.StatusOK)
	}
	switch {
	case b.status >= 400:
		e := gjson.ParseBytes(p)
		if e.Get("type").Str != "error" {
			b.w.WriteHeader(b.status) // the format's own error (a scripted fault)
			return b.w.Write(p)
		}
		typ := map[string]string{
			"rate_limit_error": "ThrottlingException", "overloaded_error": "ServiceUnavailableException",
			"api_error": "InternalServerException", "not_found_error": "ResourceNotFoundException",
		}[e.Get("error.type").Str]
		if typ == "" {
			typ = "ValidationException"
		}
		b.w.Header().Del("Content-Length")
		bedrockError(b.w, b.status, typ, e.Get("error.message").Str)
		return len(p), nil
	case !b.stream:
		return b.w.Write(p)
	}
	b.pending = append(b.pending, p...)
	for {
		ev, rest, ok := sse.Cut(b.pending)
		if !ok {
			break
		}
		b.frame(ev)
		b.pending = append(b.pending[:0], rest...)
	}
	return len(p), nil
}

// frame writes one of Anthropic's stream events as Bedrock sends it.
func (b *bedrockMessagesWriter) frame(ev []byte) {
	name, data := sse.Fields(ev)
	if len(data) == 0 {
		return
	}
	msg := eventstream.Message{Headers: eventstream.Headers{
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
	}}
	switch string(name) {
	case "ping":
		return // Bedrock sends none
	case "error":
		e := gjson.ParseBytes(data)
		typ := "modelStreamErrorException"
		switch e.Get("error.type").Str {
		case "overloaded_error":
			typ = "serviceUnavailableException"
		case "rate_limit_error":
			typ = "throttlingException"
		}
		msg.Headers = append(msg.Headers,
			eventstream.Header{Name: ":exception-type", Value: eventstream.StringValue(typ)},
			eventstream.Header{Name: ":message-type", Value: eventstream.StringValue("exception")})
		msg.Payload = append(appendString([]byte(`{"message":`), e.Get("error.message").Str), '}')
	default:
		if string(name) == "message_stop" {
			data, _ = sjson.SetRawBytes(data, "amazon-bedrock-invocationMetrics",
				[]byte(`{"inputTokenCount":0,"outputTokenCount":0,"invocationLatency":1,"firstByteLatency":1}`))
		}
		payload := append([]byte(`{"bytes":"`), base64.StdEncoding.EncodeToString(data)...)
		msg.Headers = append(msg.Headers,
			eventstream.Header{Name: ":event-type", Value: eventstream.StringValue("chunk")},
			eventstream.Header{Name: ":message-type", Value: eventstream.StringValue("event")})
		msg.Payload = append(payload, `","p":"abcdefghij"}`...)
	}
	b.buf.Reset()
	_ = b.enc.Encode(&b.buf, msg)
	_, _ = b.w.Write(b.buf.Bytes())
}

// Flush passes the stream on.
func (b *bedrockMessagesWriter) Flush() { _ = http.NewResponseController(b.w).Flush() }
