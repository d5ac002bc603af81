// Package toyprovider is a provider type written the way a third party
// would write one, outside modelgate's caddygateway tree: its own Caddy
// module (modelgate.providers.toy), its own wire format, request signing,
// stream framing and error mapping, and a fake server that speaks it. The
// integration tests load it from a Caddyfile to show that the provider
// contract is open; nothing of modelgate imports it.
//
// The toy wire format:
//
//	POST <base>/generate?model=<model>[&stream=1]
//	X-Toy-Date: <RFC 3339>   X-Toy-Signature: hex HMAC-SHA256 over
//	"<method>\n<request URI>\n<host>\n<date>\n" and the body
//	{"prompt": [{"who": "user"|"bot"|"rules", "text": "…"}], "max": <n>}
//
// answered with {"id": "…", "text": "…", "words": {"in": n, "out": m}}, or,
// for a stream, with Content-Type application/x-toy-frames: frames of a
// 4-byte big-endian length and a JSON object {"text": "…"}, the last one
// {"done": true, "words": {…}}. Errors are {"fault": {"kind", "detail"}};
// kind "busy" means overloaded whatever the status.
package toyprovider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/providers"
)

func init() {
	caddy.RegisterModule(Provider{})
}

// Provider is the toy provider type.
type Provider struct {
	caddygateway.ProviderBase

	// SigningSecret signs every request (a placeholder is resolved).
	SigningSecret string `json:"signing_secret,omitempty"`
}

var providerType = caddygateway.ProviderType{Name: "toy"}

// CaddyModule returns the Caddy module information.
func (Provider) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "modelgate.providers.toy", New: func() caddy.Module { return new(Provider) }}
}

// Provision sets up the signer and the base.
func (p *Provider) Provision(ctx caddy.Context) error {
	secret := caddy.NewReplacer().ReplaceKnown(p.SigningSecret, "")
	if secret == "" {
		return errors.New("toy: signing_secret is required")
	}
	t := providerType
	t.Auth = Signer{Secret: []byte(secret)}
	return p.ProvisionBase(ctx, t)
}

// UnmarshalCaddyfile reads the provider block: the common options and
// signing_secret.
func (p *Provider) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return p.UnmarshalBlock(d, providerType, func(d *caddyfile.Dispenser) (bool, error) {
		if d.Val() != "signing_secret" {
			return false, nil
		}
		if !d.AllArgs(&p.SigningSecret) {
			return true, d.ArgErr()
		}
		return true, nil
	})
}

// Base returns the common configuration.
func (p *Provider) Base() *caddygateway.ProviderBase { return &p.ProviderBase }

// Endpoints says the toy serves chat.
func (p *Provider) Endpoints() caddygateway.Endpoints { return caddygateway.Endpoints{Chat: Chat{}} }

// Signer signs requests as the toy format wants.
type Signer struct{ Secret []byte }

// Signature is the signature of one request.
func (s Signer) Signature(method, uri, host, date string, body []byte) string {
	m := hmac.New(sha256.New, s.Secret)
	fmt.Fprintf(m, "%s\n%s\n%s\n%s\n", method, uri, host, date)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Authenticate signs req, which is the request exactly as it is sent.
func (s Signer) Authenticate(req *http.Request, body []byte) error {
	date := time.Now().UTC().Format(time.RFC3339)
	req.Header.Set("X-Toy-Date", date)
	req.Header.Set("X-Toy-Signature", s.Signature(req.Method, req.URL.RequestURI(), req.Host, date, body))
	return nil
}

// Chat translates unified chat to the toy format.
type Chat struct{}

// ChatRequest writes the toy request: the prompt, the model and stream in
// the query string.
func (Chat) ChatRequest(body []byte, model string) (providers.Request, error) {
	root := gjson.ParseBytes(body)
	if root.Get("tools").Exists() {
		return providers.Request{}, providers.Unsupported("tools", "toy")
	}
	b := []byte(`{"prompt":[`)
	for i, m := range root.Get("messages").Array() {
		if i > 0 {
			b = append(b, ',')
		}
		who := map[string]string{"user": "user", "assistant": "bot", "system": "rules", "developer": "rules"}[m.Get("role").Str]
		if who == "" {
			return providers.Request{}, providers.Unsupported(fmt.Sprintf("messages[%d].role", i), "toy")
		}
		b = append(b, `{"who":`...)
		b = providers.AppendString(b, who)
		b = append(b, `,"text":`...)
		b = providers.AppendString(b, m.Get("content").String())
		b = append(b, '}')
	}
	b = append(b, `],"max":`...)
	b = strconv.AppendInt(b, max(root.Get("max_tokens").Int(), 0), 10)
	b = append(b, '}')
	q := url.Values{"model": {model}}
	req := providers.Request{Path: "/generate", Body: b}
	if root.Get("stream").Bool() {
		q.Set("stream", "1")
		req.Framing = Framing{}
	}
	req.Query = q.Encode()
	return req, nil
}

// ChatResponse turns a toy answer into a chat.completion, and says what
// it used.
func (Chat) ChatResponse(body []byte) ([]byte, providers.Used, error) {
	a := gjson.ParseBytes(body)
	if !a.Get("text").Exists() {
		return nil, providers.Used{}, errors.New("toy answer without text")
	}
	out := []byte(`{"id":`)
	out = providers.AppendString(out, "chatcmpl-"+a.Get("id").Str)
	out = append(out, `,"object":"chat.completion","created":0,"model":"toy","choices":[{"index":0,"message":{"role":"assistant","content":`...)
	out = providers.AppendString(out, a.Get("text").Str)
	out = append(out, `},"finish_reason":"stop"}],"usage":`...)
	return appendUsage(out, a.Get("words")), used(a.Get("words")), nil
}

// used is what a toy answer of these words used.
func used(words gjson.Result) providers.Used {
	return providers.Used{Prompt: words.Get("in").Int(), Completion: words.Get("out").Int(), Known: true}
}

func appendUsage(b []byte, words gjson.Result) []byte {
	in, out := words.Get("in").Int(), words.Get("out").Int()
	return fmt.Appendf(b, `{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
}

// ChatStream translates toy frames into chunks.
func (Chat) ChatStream(opts providers.StreamOptions) providers.StreamTranslator {
	return &stream{usage: opts.IncludeUsage}
}

// Error maps toy faults: kind "busy" is an overload (503, worth a fallback)
// whatever the status, and X-Toy-Retry-After becomes retry information in
// the message.
func (Chat) Error(status int, h http.Header, body []byte) *providers.Error {
	f := gjson.GetBytes(body, "fault")
	if f.Get("kind").Str == "busy" {
		return &providers.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "overloaded",
			Message: "toy is busy; retry after " + h.Get("X-Toy-Retry-After") + "s"}
	}
	e := providers.ErrorFromBody(status, nil)
	if d := f.Get("detail").Str; d != "" {
		e.Message = d
	}
	return e
}

type stream struct {
	usage bool
	done  bool
	used  providers.Used
}

const chunkHead = `data: {"id":"chatcmpl-toy","object":"chat.completion.chunk","created":0,"model":"toy","choices":[`

func (s *stream) Event(dst, ev []byte) ([]byte, error) {
	f := gjson.ParseBytes(ev)
	if f.Get("done").Bool() {
		s.done, s.used = true, used(f.Get("words"))
		dst = append(dst, chunkHead...)
		dst = append(dst, `{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"...)
		if s.usage {
			dst = append(dst, chunkHead...)
			dst = append(dst, `],"usage":`...)
			dst = appendUsage(dst, f.Get("words"))
			dst = append(dst, "\n\n"...)
		}
		return dst, nil
	}
	dst = append(dst, chunkHead...)
	dst = append(dst, `{"index":0,"delta":{"content":`...)
	dst = providers.AppendString(dst, f.Get("text").Str)
	return append(dst, `},"finish_reason":null}]}`+"\n\n"...), nil
}

// Usage is what the stream's last frame said it used.
func (s *stream) Usage() providers.Used { return s.used }

func (s *stream) Close(dst []byte) []byte {
	if !s.done {
		return append(dst, `data: {"error":{"message":"the toy stream was cut off","type":"server_error","param":null,"code":"upstream_aborted"}}`+"\n\n"...)
	}
	return append(dst, "data: [DONE]\n\n"...)
}

// Framing cuts the toy's length-prefixed frames.
type Framing struct{}

// MediaType of a toy stream.
const MediaType = "application/x-toy-frames"

// IsStream reports whether contentType is a toy stream.
func (Framing) IsStream(contentType string) bool { return contentType == MediaType }

// Cut returns the first complete frame of buf.
func (Framing) Cut(buf []byte) (event, rest []byte, ok bool, err error) {
	if len(buf) < 4 {
		return nil, buf, false, nil
	}
	n := int(binary.BigEndian.Uint32(buf))
	if n > 1<<20 {
		return nil, nil, false, errors.New("toy frame longer than 1 MiB")
	}
	if len(buf) < 4+n {
		return nil, buf, false, nil
	}
	return buf[4 : 4+n], buf[4+n:], true, nil
}

// Interface guards
var (
	_ caddygateway.Provider      = (*Provider)(nil)
	_ caddyfile.Unmarshaler      = (*Provider)(nil)
	_ caddygateway.Authenticator = Signer{}
	_ providers.Chat             = Chat{}
	_ providers.Framing          = Framing{}
)
