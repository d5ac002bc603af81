package gateway

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/openai"
	"github.com/modelgate/modelgate/providers/sse"
)

// This file serves a call: it checks the request, resolves its model to
// targets, admits it, translates it for each target's provider, sends it
// through that provider's Upstream and falls back to the next target
// while nothing has reached the client, then settles it.

// endpoint describes one endpoint of the unified API to the gateway.
type endpoint struct {
	// label names the endpoint in metrics and messages.
	label string
	// serves reports whether the provider serves the endpoint.
	serves func(p *Provider) bool
	// api is how the endpoint's API writes the gateway's own errors; nil:
	// OpenAI's.
	api *api
	// free is set for endpoints that cost nothing (count_tokens, which
	// the providers do not charge for; file uploads, which no provider
	// sees): their calls are priced at nothing rather than unpriced, and
	// count against requests per minute alone (requestsOnly).
	free bool
}

// api is how an ingress API says what the gateway itself says: its error
// bodies, and the event that ends a stream the gateway cannot finish.
type api struct {
	errorBody   func(e *providers.Error) (status int, body []byte)
	streamError func(dst []byte, e *providers.Error) []byte
}

// openAIAPI is the error shape of OpenAI's APIs, the unified API's own.
var openAIAPI = &api{
	errorBody:   func(e *providers.Error) (int, []byte) { return e.Status, e.JSON() },
	streamError: func(dst []byte, e *providers.Error) []byte { return sse.AppendData(dst, e.JSON()) },
}

// apiOf returns the endpoint's API, OpenAI's by default.
func (e *endpoint) apiOf() *api {
	if e.api == nil {
		return openAIAPI
	}
	return e.api
}

var (
	endpointChat       = &endpoint{label: "chat_completions", serves: func(p *Provider) bool { return p.Chat != nil }}
	endpointRerank     = &endpoint{label: "rerank", serves: func(p *Provider) bool { return p.Rerank != nil }}
	endpointEmbeddings = &endpoint{label: "embeddings", serves: func(p *Provider) bool { return p.Embeddings != nil }}
	endpointFiles      = &endpoint{label: "files", serves: func(*Provider) bool { return false }, free: true}
	endpointUnknown    = &endpoint{label: "unknown", serves: func(*Provider) bool { return false }}
)

// endpointOf is the endpoint of an API.
func endpointOf(a API) *endpoint {
	switch a {
	case APIChat:
		return endpointChat
	case APIEmbeddings:
		return endpointEmbeddings
	case APIRerank:
		return endpointRerank
	case APIResponses:
		return endpointResponses
	case APIMessages:
		return endpointMessages
	case APICountTokens:
		return endpointCountTokens
	case APIFiles:
		return endpointFiles
	}
	return endpointUnknown
}

// request is a call as its API reads it, ready to be translated for each
// target.
type request struct {
	endpoint *endpoint
	model    string // as the client named it
	stream   bool   // the answer is streamed (the latency policy compares first bytes then)
	body     []byte // the request as the client sent it, for estimates
	// What the estimate reads instead of the body, where there is one:
	// the conversation a Responses request continues, which is sent with
	// it; an embeddings request's inputs; a rerank's query and documents.
	history    []byte
	embeddings *providers.EmbeddingsRequest
	rerank     *providers.RerankRequest
	// prepare translates the request for a target's provider, which serves
	// the endpoint. A translation error is the client's (400) and ends the
	// request.
	prepare func(p *Provider, model string) (providers.Request, exchange, error)
	// guarded takes the client's body as the request guards masked it
	// (every byte but the masked texts kept), for prepare to translate in
	// place of the client's; an error is the client's (400).
	guarded func(body []byte) error
	// guards are the call's guards, once it is admitted; nil: none.
	guards *callGuards
}

// Serve serves c, filling in o: the answer or the error, written to
// o.Header and o.Body, or streamed to c.Sink, and what the call used. The
// host may set o.Header to a header map of its own before (the response
// writer's), and read o.Tried while the call is served. o.Status is 0 when
// the client went away before anything was answered: there is nobody to
// answer.
func (g *Gateway) Serve(ctx context.Context, c *Call, o *Outcome) {
	if o.Header == nil {
		o.Header = make(http.Header)
	}
	o.Key, o.Start = c.Key, time.Now()
	if c.Log == nil {
		c.Log = g.log
	}
	ctx = g.traceCall(ctx, c, o)
	// A managed key in a request (a key pasted into a prompt or a tool
	// result) is on its way into a provider's logs: it is reported exposed.
	// Nearly no request holds one: where it was seen is named (a string
	// built) only for one that may.
	if bytes.Contains(c.Body, keyPattern) {
		g.scanExposure(c.where(), "", c.Body, c.Key)
	}
	switch c.API {
	case APIChat:
		g.chat(ctx, c, o)
	case APIEmbeddings:
		g.embeddings(ctx, c, o)
	case APIRerank:
		g.rerank(ctx, c, o)
	case APIResponses:
		g.serveResponses(ctx, c, o)
	case APIMessages:
		g.messages(ctx, c, o)
	case APICountTokens:
		g.countTokens(ctx, c, o)
	default:
		o.fail(openAIAPI, notFound("", "no such endpoint"))
	}
	o.trace.end(c, o)
	if o.Status != 0 {
		g.obs.Answered(c, o)
	}
}

// where names where a call's body was seen, for the exposure of a key in it.
func (c *Call) where() string {
	if c.Batch != nil {
		return "batch " + c.Batch.BatchID + " line " + c.Batch.CustomID
	}
	return "POST " + c.Path
}

// serve checks that the call's key may use the request's model, resolves
// it and tries each target in turn until one answers; it answers the last
// failure when none does.
func (g *Gateway) serve(ctx context.Context, c *Call, o *Outcome, rq *request) {
	a := rq.endpoint.apiOf()
	if c.Key != nil && !c.Key.Allows(rq.model) {
		o.fail(a, modelNotAllowed(rq.model))
		return
	}
	targets := g.routes.resolve(rq.model)
	if len(targets) == 0 {
		o.fail(a, modelNotFound(rq.model))
		return
	}
	adm, ok := g.admit(ctx, c, o, rq, targets)
	if !ok {
		return // refused (a limit or a budget): o says why
	}
	rq.guards = g.guardsOf(c, rq, targets, o.trace)
	if !g.guardRequest(ctx, c, o, rq, rq.guards) {
		adm.done(ctx, nil)
		return // refused by a guard: nothing reached a provider, nor the cache
	}
	cc := g.cacheFor(ctx, c, o, targets)
	if cc != nil && cc.hit {
		g.serveHit(ctx, c, o, rq, adm, cc)
		return
	}
	// The guards see the stream before the cache's collector: what is
	// stored is what the client got.
	sink, sg := g.streamSink(ctx, c, rq, rq.guards, cc.sink(c))
	at := attempt{api: a, sink: sink, o: o, obs: g.obs}
	rt := g.route(rq.model, targets, rq.stream)
	defer rt.close()
	var last *failure
	var failed Target // the target that failed last, whose log line waits for what comes next
	// The routing plan chooses the next target (routing.go); each attempt
	// starts at at.begin and is reported at at.report.
	for t, timeouts, ok := rt.nextTarget(); ok; t, timeouts, ok = rt.nextTarget() {
		if failed.Provider != nil {
			g.failed(c, rq, failed, last, true)
			failed = Target{}
		}
		o.Tried = rt.offered(t)
		if !rq.endpoint.serves(t.Provider) {
			last = &failure{err: &providers.Error{
				Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unsupported_endpoint",
				Message: "provider " + t.Provider.Name + " does not serve " + rq.endpoint.label,
			}}
			continue
		}
		preq, ex, err := rq.prepare(t.Provider, t.Model)
		if err != nil {
			// The provider cannot take this request (a parameter it does
			// not support): the next target may.
			last = &failure{err: asProviderError(err)}
			continue
		}
		at.begin(timeouts)
		actx := o.trace.startAttempt(ctx, o, t, &preq, &ex)
		status, f := at.forward(actx, t.Provider, preq, &ex)
		at.report(&rt)
		o.trace.endAttempt(c.API, o, status, f)
		if f == nil {
			o.Target = t
			if sg != nil && o.Streamed {
				sg.finish()
			}
			if status < 300 {
				g.guardOutcome(ctx, c, o, rq, rq.guards)
				g.settle(ctx, o, rq, adm)
				g.cacheStore(ctx, cc, o)
			} else {
				adm.done(ctx, nil)
			}
			return
		}
		last = f
		if ctx.Err() != nil {
			adm.done(ctx, nil)
			return // the client has gone: nobody waits for another target, nor for an answer
		}
		failed = t
	}
	if failed.Provider != nil {
		g.failed(c, rq, failed, last, false)
	}
	adm.done(ctx, nil)
	if d, ok := rt.unavailable(); ok {
		o.failWith(a, &failure{err: targetsUnavailable(rq.model, d)})
		return
	}
	o.failWith(a, last)
}

// failed logs that target t failed a call with f, and tells the observer
// when the next target is tried (next).
func (g *Gateway) failed(c *Call, rq *request, t Target, f *failure, next bool) {
	msg := "provider failed"
	if next {
		g.obs.Fallback(c, t)
		msg = "provider failed; trying the next target"
	}
	c.Log.Warn(msg,
		zap.String("endpoint", rq.endpoint.label),
		zap.String("provider", t.Provider.Name),
		zap.String("model", t.Model),
		zap.Int("status", f.err.Status),
		zap.String("error", f.err.Message),
		zap.NamedError("cause", f.cause))
}

// chat serves POST /v1/chat/completions.
func (g *Gateway) chat(ctx context.Context, c *Call, o *Outcome) {
	body := c.Body
	info, err := providers.ValidateChat(body)
	if err != nil {
		o.fail(openAIAPI, asProviderError(err))
		return
	}
	// The gateway counts every answer's tokens: a stream is always asked
	// for its usage, which the relay of a stream passed through takes out
	// again when the client did not ask for it.
	if info.Stream && !info.IncludeUsage {
		body = askUsage(body)
	}
	g.serve(ctx, c, o, &request{endpoint: endpointChat, model: info.Model, body: body, stream: info.Stream,
		guarded: func(masked []byte) error {
			body = masked
			if info.Stream && !info.IncludeUsage {
				body = askUsage(body)
			}
			return nil
		},
		prepare: func(p *Provider, model string) (providers.Request, exchange, error) {
			preq, err := p.Chat.ChatRequest(body, model)
			ex := exchange{stream: info.Stream, mapError: p.chatErrorMapper(),
				translate: func(answer []byte) ([]byte, Usage, error) {
					out, used, err := p.Chat.ChatResponse(answer)
					if err == nil {
						out = withModel(out, model)
					}
					return out, used, err
				}}
			if info.Stream {
				ex.tr = p.Chat.ChatStream(providers.StreamOptions{IncludeUsage: info.IncludeUsage, Model: model})
				if ex.tr == nil {
					ex.tr = openai.NewRelay(info.IncludeUsage)
				}
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
func (g *Gateway) rerank(ctx context.Context, c *Call, o *Outcome) {
	req, err := providers.ValidateRerank(c.Body)
	if err != nil {
		o.fail(openAIAPI, asProviderError(err))
		return
	}
	g.serve(ctx, c, o, &request{endpoint: endpointRerank, model: req.Model, rerank: &req,
		guarded: func(masked []byte) error {
			r, err := providers.ValidateRerank(masked)
			if err == nil {
				req = r
			}
			return err
		},
		prepare: func(p *Provider, model string) (providers.Request, exchange, error) {
			tr := p.Rerank
			preq, err := tr.RerankRequest(req, model)
			return preq, exchange{
				translate: func(answer []byte) ([]byte, Usage, error) {
					a, err := tr.RerankResponse(answer)
					if err != nil {
						return nil, Usage{}, err
					}
					out, ok := providers.RerankResult(nil, a, len(req.Documents), req.TopN)
					if !ok {
						return nil, Usage{}, errBadRerankAnswer
					}
					return out, a.Used(), nil
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
func (g *Gateway) embeddings(ctx context.Context, c *Call, o *Outcome) {
	req, err := providers.ValidateEmbeddings(c.Body)
	if err != nil {
		o.fail(openAIAPI, asProviderError(err))
		return
	}
	g.serve(ctx, c, o, &request{endpoint: endpointEmbeddings, model: req.Model, embeddings: &req,
		guarded: func(masked []byte) error {
			r, err := providers.ValidateEmbeddings(masked)
			if err == nil {
				req = r
			}
			return err
		},
		prepare: func(p *Provider, model string) (providers.Request, exchange, error) {
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
				collect: func(headers []http.Header, bodies [][]byte) ([]byte, Usage, error) {
					res := providers.EmbeddingsResult{Vectors: make([][]float32, 0, req.Inputs()), KeepBase64: req.Base64}
					for i := range bodies {
						if err := tr.EmbeddingsResponse(i, headers[i], bodies[i], &res); err != nil {
							return nil, Usage{}, err
						}
					}
					out, ok := providers.EmbeddingsAnswer(nil, &req, &res)
					if !ok {
						return nil, Usage{}, errBadEmbeddings
					}
					return out, res.Used(&req), nil
				},
				mapError: tr.Error,
			}, nil
		}})
}
