package caddygateway

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/sse"
)

// dispatcher serves the unified API's endpoints for the HTTP handler and
// the batch executor alike: it checks a request, resolves its model to
// targets, translates the request for each target's provider, sends it
// through that provider's reverse_proxy and falls back to the next target
// while nothing has reached the client.
type dispatcher struct {
	guard           guard // admits and settles calls; noGuard when nothing counts
	providers       map[string]*provider
	aliases         map[string][]string // alias -> "<provider>/<model>" targets
	bare            map[string]string   // bare model name -> provider name, from models lists
	defaultProvider string
	builtinTools    string // the Responses translator's policy for built-in tools (responses.BuiltinDrop, …)
}

// newDispatcher indexes the providers' models lists; the same bare name
// in two lists is an error, since nothing would say which serves it.
func newDispatcher(provs map[string]*provider, aliases map[string][]string, defaultProvider string) (*dispatcher, error) {
	d := &dispatcher{guard: noGuard{}, providers: provs, aliases: aliases, bare: make(map[string]string), defaultProvider: defaultProvider}
	for _, name := range sortedKeys(provs) {
		for _, m := range provs[name].base.Models {
			if other, dup := d.bare[m]; dup {
				return nil, fmt.Errorf("model %q is listed by providers %q and %q: add a model alias to say which serves the bare name", m, other, name)
			}
			d.bare[m] = name
		}
	}
	return d, nil
}

// target is one provider and the provider's own name for the model.
type target struct {
	provider *provider
	model    string
}

// String is the target as logs name it: "<provider>/<model>".
func (t target) String() string { return t.provider.name + "/" + t.model }

// resolve turns a request's model into the targets to try, in order, per
// the routing rules: "<provider>/<model>" when <provider> is configured,
// else a bare name resolved by alias, by a provider's models list, then by
// the default provider.
func (d *dispatcher) resolve(model string) []target {
	if pname, rest, ok := strings.Cut(model, "/"); ok && rest != "" {
		if p, ok := d.providers[pname]; ok {
			return []target{{provider: p, model: rest}}
		}
	}
	if targets, ok := d.aliases[model]; ok {
		out := make([]target, 0, len(targets))
		for _, t := range targets {
			pname, m, _ := strings.Cut(t, "/")
			out = append(out, target{provider: d.providers[pname], model: m})
		}
		return out
	}
	if pname, ok := d.bare[model]; ok {
		return []target{{provider: d.providers[pname], model: model}}
	}
	if d.defaultProvider != "" {
		return []target{{provider: d.providers[d.defaultProvider], model: model}}
	}
	return nil
}

// byDefault reports whether only the default provider takes model: no
// configured provider is named in it, no alias is it, no models list has
// it. Nothing in the configuration says such a model exists.
func (d *dispatcher) byDefault(model string) bool {
	if pname, rest, ok := strings.Cut(model, "/"); ok && rest != "" {
		if _, ok := d.providers[pname]; ok {
			return false
		}
	}
	_, alias := d.aliases[model]
	_, listed := d.bare[model]
	return !alias && !listed && d.defaultProvider != ""
}

// modelIDs lists every model name a client can use without knowing the
// configuration: the aliases and each provider's listed models as
// "<provider>/<model>", sorted.
func (d *dispatcher) modelIDs() []modelID {
	var out []modelID
	for alias := range d.aliases {
		out = append(out, modelID{id: alias, owner: "modelgate"})
	}
	for name, p := range d.providers {
		for _, m := range p.base.Models {
			out = append(out, modelID{id: name + "/" + m, owner: name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

type modelID struct{ id, owner string }

// endpoint describes one endpoint of the unified API to the dispatcher.
type endpoint struct {
	// label names the endpoint in metrics and messages.
	label string
	// serves reports whether the provider serves the endpoint.
	serves func(p *provider) bool
	// api is how the endpoint's API writes the gateway's own errors; nil:
	// OpenAI's.
	api *api
	// usage reads what a request used from the endpoint's answers.
	usage usageParser
	// free is set for endpoints that cost nothing (count_tokens, which
	// the providers do not charge for; file uploads, which no provider
	// sees): their calls are priced at nothing rather than unpriced, and
	// count against requests per minute alone (requestsOnly).
	free bool
}

// api is how an ingress API says what the gateway itself says: its error
// bodies, and the event that ends a stream the gateway cannot finish.
type api struct {
	writeError  func(w http.ResponseWriter, e *providers.Error)
	streamError func(dst []byte, e *providers.Error) []byte
	// ends reports whether an event, as the provider sent it, gives the
	// client the whole answer: the API's last event or an error event
	// (for chat also a choice's finish_reason). A stream passed through
	// that the provider closes before one gets streamError's event.
	ends func(event []byte) bool
}

// openAIAPI is the error shape of OpenAI's APIs, the unified API's own.
var openAIAPI = &api{
	writeError:  WriteError,
	streamError: func(dst []byte, e *providers.Error) []byte { return sse.AppendData(dst, e.JSON()) },
	ends:        chatStreamEnds,
}

// chatStreamEnds reports whether a chat stream's event ends it: data:
// [DONE], an error, or a chunk with a choice's finish_reason — some
// OpenAI-compatible servers never send [DONE], and their answer is whole
// once the finish_reason came. It looks at every event of every stream
// passed through, so a chunk on one data line is read without parsing
// its fields.
func chatStreamEnds(ev []byte) bool {
	if bytes.HasPrefix(ev, []byte("data: {")) && ev[len(ev)-1] == '}' {
		data := ev[len("data: "):]
		return bytes.HasPrefix(data, []byte(`{"error"`)) || finishes(data)
	}
	name, data := sse.Fields(ev)
	data = bytes.TrimSpace(data)
	return string(name) == "error" || string(data) == "[DONE]" || bytes.HasPrefix(data, []byte(`{"error"`)) || finishes(data)
}

// finishes reports whether a chat chunk has a finish_reason that is not
// null. It looks for `_reason":`, whose first byte is rare in a chunk (a
// search for `"finish_reason":` stops at every quote), then checks what
// comes before.
func finishes(chunk []byte) bool {
	const field, head = `_reason":`, `"finish`
	for from := 0; ; {
		i := bytes.Index(chunk[from:], []byte(field))
		if i < 0 {
			return false
		}
		i += from
		from = i + len(field)
		if i < len(head) || string(chunk[i-len(head):i]) != head {
			continue
		}
		if v := bytes.TrimLeft(chunk[from:], " "); len(v) > 0 && v[0] == '"' {
			return true
		}
	}
}

// apiOf returns the endpoint's API, OpenAI's by default.
func (e endpoint) apiOf() *api {
	if e.api == nil {
		return openAIAPI
	}
	return e.api
}

var (
	endpointChat       = endpoint{label: "chat_completions", serves: func(p *provider) bool { return p.Chat != nil }, usage: chatUsage}
	endpointRerank     = endpoint{label: "rerank", serves: func(p *provider) bool { return p.Rerank != nil }, usage: rerankUsage}
	endpointEmbeddings = endpoint{label: "embeddings", serves: func(p *provider) bool { return p.Embeddings != nil }, usage: embeddingsUsage}
)

// call is one request to an endpoint.
type call struct {
	endpoint endpoint
	model    string // as the client named it
	body     []byte // the request as the client sent it, for estimates
	// What the estimate reads instead of the body, where there is one:
	// the conversation a Responses request continues, which is sent with
	// it; an embeddings request's inputs; a rerank's query and documents.
	history    []byte
	embeddings *providers.EmbeddingsRequest
	rerank     *providers.RerankRequest
	log        *zap.Logger
	// prepare translates the request for a target's provider, which serves
	// the endpoint. A translation error is the client's (400) and ends the
	// request.
	prepare func(p *provider, model string) (providers.Request, exchange, error)
}

// serve checks that key may use the call's model, resolves it and tries
// each target in turn until one answers; it writes the last failure when
// none does. key is nil for requests already checked (batch lines, whose
// models were checked when the batch was created).
func (d *dispatcher) serve(w http.ResponseWriter, r *http.Request, key *Key, c *call) {
	if key != nil && !key.allows(c.model) {
		writeEndpointError(w, c.endpoint, "", modelNotAllowed(c.model))
		return
	}
	targets := d.resolve(c.model)
	if len(targets) == 0 {
		writeEndpointError(w, c.endpoint, "", modelNotFound(c.model))
		return
	}
	m := &meter{start: time.Now()}
	settle, ok := d.guard.admit(w, r, key, c, targets)
	if !ok {
		return // refused (a limit or a budget): the guard answered
	}
	// The request's placeholders come from its meter, when read.
	r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer).Map(m.placeholder)
	var last *failure
	for i, t := range targets {
		m.tried = targets[:i+1]
		if !c.endpoint.serves(t.provider) {
			last = &failure{err: &providers.Error{
				Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unsupported_endpoint",
				Message: "provider " + t.provider.name + " does not serve " + c.endpoint.label,
			}}
			continue
		}
		preq, ex, err := c.prepare(t.provider, t.model)
		if err != nil {
			// The provider cannot take this request (a parameter it does
			// not support): the next target may.
			last = &failure{err: asProviderError(err)}
			continue
		}
		ex.api, ex.meter, ex.usage = c.endpoint.apiOf(), m, c.endpoint.usage
		if ex.stream {
			tap := &tapStream{inner: ex.tr, m: m, parse: c.endpoint.usage.event, strip: ex.stripUsage}
			if relays(ex.tr) {
				tap.ends = ex.api.ends
			}
			ex.tr = tap
		}
		m.stream = ex.stream
		status, f := t.provider.forward(w, r, preq, ex)
		if f == nil {
			observeRequest(c.endpoint.label, t.provider.name, status)
			if status < 300 {
				m.provider, m.model = t.provider, t.model
				settle(w, r, m)
			} else {
				settle(w, r, nil)
			}
			return
		}
		last = f
		if r.Context().Err() != nil {
			settle(w, r, nil)
			return // the client has gone: nobody waits for another target
		}
		msg := "provider failed"
		if i < len(targets)-1 {
			metrics.fallbacks.WithLabelValues(t.provider.name).Inc()
			msg = "provider failed; trying the next target"
		}
		c.log.Warn(msg,
			zap.String("endpoint", c.endpoint.label),
			zap.String("provider", t.provider.name),
			zap.String("model", t.model),
			zap.Int("status", f.err.Status),
			zap.String("error", f.err.Message),
			zap.NamedError("cause", f.cause))
	}
	settle(w, r, nil)
	last.write(w, c.endpoint.apiOf())
	observeRequest(c.endpoint.label, "", last.err.Status)
}

// guard admits calls before they reach a provider — rate limits, budgets —
// and settles them after: what they used, what it cost. Refusing, it has
// answered the client.
type guard interface {
	// admit returns settle, which the dispatcher calls exactly once, with
	// the meter of the answer a provider gave, or nil when none did.
	admit(w http.ResponseWriter, r *http.Request, key *Key, c *call, targets []target) (settle func(w http.ResponseWriter, r *http.Request, m *meter), ok bool)
}

// noGuard admits everything and settles nothing.
type noGuard struct{}

func (noGuard) admit(http.ResponseWriter, *http.Request, *Key, *call, []target) (func(http.ResponseWriter, *http.Request, *meter), bool) {
	return func(http.ResponseWriter, *http.Request, *meter) {}, true
}

// chat serves POST /v1/chat/completions.
func (d *dispatcher) chat(w http.ResponseWriter, r *http.Request, body []byte, key *Key, log *zap.Logger) {
	info, err := providers.ValidateChat(body)
	if err != nil {
		writeEndpointError(w, endpointChat, "", asProviderError(err))
		return
	}
	// The gateway counts every answer's tokens: a stream is always asked
	// for its usage, which a client that did not ask does not see.
	strip := info.Stream && !info.IncludeUsage
	if strip {
		body = askUsage(body)
	}
	d.serve(w, r, key, &call{endpoint: endpointChat, model: info.Model, log: log, body: body,
		prepare: func(p *provider, model string) (providers.Request, exchange, error) {
			preq, err := p.Chat.ChatRequest(body, model)
			ex := exchange{stream: info.Stream, stripUsage: strip, mapError: p.chatErrorMapper(),
				translate: func(answer []byte) ([]byte, error) {
					out, err := p.Chat.ChatResponse(answer)
					if err == nil {
						out = withModel(out, model)
					}
					return out, err
				}}
			if info.Stream {
				ex.tr = p.Chat.ChatStream(providers.StreamOptions{IncludeUsage: true, Model: model})
			}
			return preq, ex, err
		}})
}

// askUsage returns the chat request body, which ValidateChat accepted,
// with stream_options.include_usage set, as sjson.SetBytes sets it. Most
// streamed requests have no stream_options: then, found by one walk of
// the top level (gjson's Get reads every value to find a key that is not
// there), it is added before the closing brace in one copy of the body,
// the bytes sjson writes. Otherwise sjson sets it.
func askUsage(body []byte) []byte {
	members, has := 0, false
	providers.EachMember(providers.InPlace(body), func(key string, _ gjson.Result) bool {
		members++
		has = key == "stream_options"
		return !has
	})
	// (Like sjson, the copy ends at the closing brace; sjson also drops
	// what precedes the opening one: such a body goes to sjson.)
	if i := bytes.LastIndexByte(body, '}'); !has && members > 0 && body[0] == '{' {
		const field = `,"stream_options":{"include_usage":true}}`
		return append(append(make([]byte, 0, i+len(field)), body[:i]...), field...)
	}
	if b, err := sjson.SetBytes(body, "stream_options.include_usage", true); err == nil {
		return b
	}
	return body
}

// withModel fills an answer's empty "model" with the provider's name of
// the model it went to: some providers' answers do not name it (Bedrock's
// Converse, Cohere's chat).
func withModel(answer []byte, model string) []byte {
	if m := lookup(answer, "model"); m.Type != gjson.String || m.Str != "" {
		return answer
	}
	if out, err := sjson.SetBytes(answer, "model", model); err == nil {
		return out
	}
	return answer
}

var errBadRerankAnswer = errors.New("the provider's rerank answer names documents that are not in the request")

// rerank serves POST /v1/rerank (and /v1/reranker) and turns the
// provider's scores into the unified answer: highest score first, ties in
// request order, top_n applied.
func (d *dispatcher) rerank(w http.ResponseWriter, r *http.Request, body []byte, key *Key, log *zap.Logger) {
	req, err := providers.ValidateRerank(body)
	if err != nil {
		writeEndpointError(w, endpointRerank, "", asProviderError(err))
		return
	}
	d.serve(w, r, key, &call{endpoint: endpointRerank, model: req.Model, rerank: &req, log: log,
		prepare: func(p *provider, model string) (providers.Request, exchange, error) {
			tr := p.Rerank
			preq, err := tr.RerankRequest(req, model)
			return preq, exchange{
				translate: func(answer []byte) ([]byte, error) {
					a, err := tr.RerankResponse(answer)
					if err != nil {
						return nil, err
					}
					out, ok := providers.RerankResult(nil, a, len(req.Documents), req.TopN)
					if !ok {
						return nil, errBadRerankAnswer
					}
					return out, nil
				},
				mapError: tr.Error,
			}, err
		}})
}

var errBadEmbeddings = errors.New("the provider's embeddings do not fit the request (count or dimensions)")

// embeddings serves POST /v1/embeddings: the provider is asked for
// numbers, or base64 where the client asked for it and the provider takes
// it, and the answer carries them as the client asked, numbers or the
// base64 of little-endian float32s, whatever the provider sent.
func (d *dispatcher) embeddings(w http.ResponseWriter, r *http.Request, body []byte, key *Key, log *zap.Logger) {
	req, err := providers.ValidateEmbeddings(body)
	if err != nil {
		writeEndpointError(w, endpointEmbeddings, "", asProviderError(err))
		return
	}
	d.serve(w, r, key, &call{endpoint: endpointEmbeddings, model: req.Model, embeddings: &req, log: log,
		prepare: func(p *provider, model string) (providers.Request, exchange, error) {
			tr := p.Embeddings
			reqs, err := tr.EmbeddingsRequests(&req, model)
			if err != nil || len(reqs) == 0 {
				if err == nil {
					err = errors.New("the embeddings translator made no request")
				}
				return providers.Request{}, exchange{}, err
			}
			return reqs[0], exchange{
				more: reqs[1:],
				collect: func(headers []http.Header, bodies [][]byte) ([]byte, error) {
					res := providers.EmbeddingsResult{Vectors: make([][]float32, 0, req.Inputs()), KeepBase64: req.Base64}
					for i := range bodies {
						if err := tr.EmbeddingsResponse(i, headers[i], bodies[i], &res); err != nil {
							return nil, err
						}
					}
					out, ok := providers.EmbeddingsAnswer(nil, &req, &res)
					if !ok {
						return nil, errBadEmbeddings
					}
					return out, nil
				},
				mapError: tr.Error,
			}, nil
		}})
}

// route tells a batch line's model and its first target's provider, as
// the batch engine's per-provider limit counts it, or why it cannot run.
func (d *dispatcher) route(e endpoint, model string) (provider string, err error) {
	targets := d.resolve(model)
	if len(targets) == 0 {
		return "", fmt.Errorf("the model %q does not exist", model)
	}
	for _, t := range targets {
		if e.serves(t.provider) {
			return targets[0].provider.name, nil
		}
	}
	return "", fmt.Errorf("no provider of the model %q serves %s", model, e.label)
}

// writeEndpointError answers a request that reached no provider.
func writeEndpointError(w http.ResponseWriter, e endpoint, provider string, pe *providers.Error) {
	e.apiOf().writeError(w, pe)
	observeRequest(e.label, provider, pe.Status)
}

// asProviderError returns err as a unified error; anything that is not one
// already is an internal error whose text stays in the server.
func asProviderError(err error) *providers.Error {
	var pe *providers.Error
	if errors.As(err, &pe) {
		return pe
	}
	return &providers.Error{Status: http.StatusInternalServerError, Type: "server_error",
		Message: "the request could not be translated"}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
