package bedrock

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// AnthropicVersion is the anthropic_version of a Messages body sent to
// Claude on Bedrock.
const AnthropicVersion = "bedrock-2023-05-31"

// Messages passes Anthropic's Messages API through to Claude on Bedrock,
// as Anthropic's own Bedrock SDKs call it: InvokeModel
// (/model/{modelId}/invoke) and InvokeModelWithResponseStream
// (/model/{modelId}/invoke-with-response-stream) with the client's
// Messages body, less model and stream (the path says both), with
// anthropic_version bedrock-2023-05-31 and the anthropic-beta header's
// betas in anthropic_beta. Thinking signatures, cache_control, tool types
// and new fields reach Claude as the client sent them, and its answer,
// Anthropic's message or events, comes back as it was; a stream's events
// come out of their event-stream envelope (MessagesStream).
//
// Other models, and count_tokens, which InvokeModel does not serve, get
// providers.ErrNotNative: the gateway translates those through the chat
// hub (Converse) or estimates the count.
type Messages struct {
	// BaseModels names the model behind an id that does not say which it
	// is (see Chat.BaseModels).
	BaseModels map[string]string
}

// NativeRequest returns the InvokeModel request for a Messages request.
func (m Messages) NativeRequest(path string, body []byte, model string, header http.Header) (providers.Request, error) {
	if path != "/messages" || baseFamily(m.BaseModels, model).provider != "anthropic" {
		return providers.Request{}, providers.ErrNotNative
	}
	stream := false
	betas := headerBetas(header)
	w := jsonw.New(make([]byte, 0, len(body)+64))
	o := w.Object()
	providers.EachMember(providers.InPlace(body), func(key string, v gjson.Result) bool {
		switch key {
		case "model", "anthropic_version":
		case "stream":
			stream = v.Type == gjson.True
		case "anthropic_beta":
			v.ForEach(func(_, b gjson.Result) bool {
				if b.Type == gjson.String && !contains(betas, b.Str) {
					betas = append(betas, b.Str)
				}
				return true
			})
		default:
			o.Key(key).Compact(v.Raw)
		}
		return true
	})
	o.Str("anthropic_version", AnthropicVersion)
	if len(betas) > 0 {
		a := o.Array("anthropic_beta")
		for _, b := range betas {
			a.Str(b)
		}
		a.End()
	}
	o.End()
	out, err := w.Finish()
	if err != nil {
		return providers.Request{}, err
	}
	op := "invoke"
	if stream {
		op = "invoke-with-response-stream"
	}
	p, err := modelPath(model, op)
	if err != nil {
		return providers.Request{}, err
	}
	req := providers.Request{Path: p, Body: out}
	if stream {
		req.Framing = MessagesStream
	}
	return req, nil
}

// headerBetas are the betas of the anthropic-beta headers, a comma list
// each, in order, once each.
func headerBetas(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Anthropic-Beta") {
		for b := range strings.SplitSeq(v, ",") {
			if b = strings.TrimSpace(b); b != "" && !contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// MessagesStream is the framing of InvokeModelWithResponseStream's answer
// for Claude: AWS's event stream (EventStream), each chunk event holding
// one of Anthropic's server-sent events as the base64 "bytes" of its
// payload. Cut hands on that server-sent event as Anthropic sends it
// ("event: <type>" and "data: <json>" lines), so the stream passes through
// as if it came from Anthropic; an exception message becomes Anthropic's
// error event. Messages of other types carry nothing for the client and
// are skipped.
var MessagesStream providers.Framing = messagesFraming{}

type messagesFraming struct{}

func (messagesFraming) IsStream(contentType string) bool { return EventStream.IsStream(contentType) }

func (messagesFraming) Cut(buf []byte) (event, rest []byte, ok bool, err error) {
	for {
		ev, r, ok, err := EventStream.Cut(buf)
		if err != nil || !ok {
			return nil, buf, false, err
		}
		buf = r
		kind, name, payload, err := parseEvent(ev)
		if err != nil {
			return nil, buf, false, err
		}
		var out []byte
		switch kind {
		case kindEvent:
			if name != "chunk" {
				continue
			}
			if out, err = chunkEvent(payload); err != nil {
				return nil, buf, false, err
			}
		case kindException, kindError:
			msg := string(payload)
			if kind == kindException && providers.ValidJSON(payload) {
				msg = gjson.GetBytes(payload, "message").Str
			}
			out = anthropicErrorEvent(name, msg)
		default:
			continue
		}
		return out, buf, true, nil
	}
}

var errBadChunk = errors.New("bedrock: a stream chunk does not hold a base64 JSON event")

// chunkEvent is the server-sent event of a chunk's payload,
// {"bytes":"<base64 of the event's JSON>", …}.
func chunkEvent(payload []byte) ([]byte, error) {
	if !providers.ValidJSON(payload) {
		return nil, errBadChunk
	}
	b := gjson.GetBytes(payload, "bytes")
	if b.Type != gjson.String {
		return nil, errBadChunk
	}
	data, err := base64.StdEncoding.DecodeString(b.Str)
	if err != nil || !providers.ValidJSON(data) {
		return nil, errBadChunk
	}
	typ := gjson.GetBytes(data, "type")
	if typ.Type != gjson.String || typ.Str == "" || strings.ContainsAny(typ.Str, "\r\n") {
		return nil, errBadChunk
	}
	out := make([]byte, 0, len("event: \ndata: ")+len(typ.Str)+len(data))
	out = append(out, "event: "...)
	out = append(out, typ.Str...)
	out = append(out, "\ndata: "...)
	return append(out, providers.CompactJSON(string(data))...), nil
}

// anthropicErrorEvent is Anthropic's error event for an exception of
// Bedrock's stream.
func anthropicErrorEvent(exception, msg string) []byte {
	e := mapError(0, exception, msg)
	typ := "api_error"
	switch {
	case e.Status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case e.Status == http.StatusServiceUnavailable || strings.EqualFold(exception, "serviceUnavailableException"):
		typ = "overloaded_error"
	case e.Status == http.StatusBadRequest:
		typ = "invalid_request_error"
	}
	if msg == "" {
		msg = "the provider reported an error in its stream"
		if exception != "" {
			msg += " (" + exception + ")"
		}
	}
	w := jsonw.New(make([]byte, 0, 96+len(msg)))
	o := w.Object()
	o.Str("type", "error")
	eo := o.Object("error")
	eo.Str("type", typ)
	eo.Str("message", msg)
	eo.End()
	o.End()
	b, _ := w.Finish() // straight-line writing: no misuse
	return append([]byte("event: error\ndata: "), b...)
}
