package caddygateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/caddyserver/certmagic"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/guardrails"
	"github.com/modelgate/modelgate/internal/evicted"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/embeddings"
	"github.com/modelgate/modelgate/providers/openai"
	"github.com/modelgate/modelgate/providers/providertest"
	"github.com/modelgate/modelgate/providers/rerank"
)

// These benchmarks measure the gateway's work per request, with
// allocations: the whole path through modelgate_auth and the
// modelgate handler next to plain reverse_proxy on the same in-memory
// upstream (BenchmarkPerRequest), and its parts: key lookup, routing, the
// pass-through's answer rewrite, one stream event on its way to the
// client, and settling what a request used. bench/cmd/loadbench measures
// the same paths over real connections, in separate processes.

// memUpstream is a provider in memory: the fake provider's answer to the
// first request of each path, stream flag and encoding_format, with the
// headers the real provider sends (providertest.ResponseHeaders), replayed
// to every later one. A stream's body is read one event per Read, as a provider sends
// them, so reverse_proxy flushes each on its own.
type memUpstream struct {
	fake    http.Handler
	mu      sync.Mutex
	answers map[string]*memAnswer
}

type memAnswer struct {
	header http.Header
	body   []byte
	events [][]byte
}

func newMemUpstream() *memUpstream {
	return &memUpstream{fake: providertest.New(providertest.Options{NoRecord: true}), answers: map[string]*memAnswer{}}
}

func (u *memUpstream) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil { // a GET has none
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
	}
	head := gjson.GetManyBytes(body, "stream", "encoding_format")
	key := req.URL.Path + "\x00" + head[0].Raw + "\x00" + head[1].Str
	u.mu.Lock()
	a := u.answers[key]
	if a == nil {
		rec := httptest.NewRecorder()
		fr := httptest.NewRequest(req.Method, req.URL.RequestURI(), bytes.NewReader(body))
		fr.Header = req.Header.Clone()
		// The gateway's transport set the provider's key; for plain
		// reverse_proxy the key is what a header_up would add.
		if fr.Header.Get("Authorization") == "" && fr.Header.Get("X-Api-Key") == "" {
			if strings.HasPrefix(req.URL.Path, "/v1/messages") {
				fr.Header.Set("X-Api-Key", benchProviderKey)
			} else {
				fr.Header.Set("Authorization", "Bearer "+benchProviderKey)
			}
		}
		u.fake.ServeHTTP(rec, fr)
		if rec.Code != http.StatusOK {
			u.mu.Unlock()
			return nil, fmt.Errorf("the fake answered %s with %d: %s", req.URL.Path, rec.Code, rec.Body.Bytes())
		}
		a = &memAnswer{header: rec.Header(), body: rec.Body.Bytes()}
		// What a provider's server adds on the wire, and the headers the
		// real provider sends with every answer that the fake did not
		// send itself (as bench/cmd/loadbench's upstream adds them).
		a.header.Set("Date", "Fri, 27 Nov 2026 12:00:00 GMT")
		for k, v := range providertest.ResponseHeaders(req.URL.Path) {
			if a.header[k] == nil {
				a.header[k] = v
			}
		}
		if strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") {
			for rest := a.body; len(rest) > 0; {
				i := bytes.Index(rest, []byte("\n\n"))
				if i < 0 {
					a.events = append(a.events, rest)
					break
				}
				a.events, rest = append(a.events, rest[:i+2]), rest[i+2:]
			}
		}
		u.answers[key] = a
	}
	u.mu.Unlock()
	res := &http.Response{StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: a.header.Clone(), Request: req, ContentLength: -1}
	if a.events != nil {
		res.Body = &eventsBody{events: a.events}
	} else {
		res.ContentLength = int64(len(a.body))
		res.Body = io.NopCloser(bytes.NewReader(a.body))
	}
	return res, nil
}

// eventsBody returns one event per Read.
type eventsBody struct {
	events [][]byte
	i      int
}

func (e *eventsBody) Read(p []byte) (int, error) {
	if e.i == len(e.events) {
		return 0, io.EOF
	}
	n := copy(p, e.events[e.i])
	if n == len(e.events[e.i]) {
		e.i++
	} else {
		e.events[e.i] = e.events[e.i][n:]
	}
	return n, nil
}

func (e *eventsBody) Close() error { return nil }

// sink is a client connection's ResponseWriter that keeps nothing but the
// status and the first answer.
type sink struct {
	header http.Header
	status int
	keep   bool
	body   bytes.Buffer
}

func (s *sink) Header() http.Header { return s.header }
func (s *sink) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
}

func (s *sink) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if s.keep {
		s.body.Write(p)
	}
	return len(p), nil
}
func (s *sink) FlushError() error { return nil }

// benchGateway is an app with an OpenAI and an Anthropic provider, both
// on one memUpstream, a static key and a managed one.
type benchGateway struct {
	app        *App
	auth       *Auth
	handler    *Handler
	plain      *reverseproxy.Handler
	managedKey string
	server     *caddyhttp.Server
	upstream   *memUpstream             // every provider's, under the gateway's transport
	bases      map[string]*ProviderBase // the providers' bases, by name
}

// rebuild makes g's app's gateway anew, of the app as it is now (a test
// changed its limits, storage or keys).
func (g *benchGateway) rebuild(tb testing.TB) {
	tb.Helper()
	if err := g.app.provisionGateway(); err != nil {
		tb.Fatal(err)
	}
}

const benchStaticKey = "sk-bench-static"

// benchProviderKey is the providers' key, as long as a real one: the
// transport scrubs each answer of it.
const benchProviderKey = "sk-proj-bench-provider-key-0123456789abcdefghijklmnopqrstuvwxyz"

func newBenchGateway(b testing.TB) *benchGateway {
	b.Helper()
	ctx, err := caddy.ProvisionContext(&caddy.Config{})
	if err != nil {
		b.Fatal(err)
	}
	up := newMemUpstream()
	base := func(url, keyHeader string) *ProviderBase {
		pb := &ProviderBase{BaseURL: url, APIKey: benchProviderKey}
		if err := pb.ProvisionBase(ctx, ProviderType{Name: "bench", KeyHeader: keyHeader}); err != nil {
			b.Fatal(err)
		}
		// Under the gateway's transport, which authenticates the
		// request and drops what the provider's answer carries for the
		// gateway alone, as it does for a provider on the network.
		pb.upstream.SetNext(up)
		return pb
	}
	// Made as the app makes them.
	oa := base("http://upstream.invalid/v1", "")
	claude := base("http://upstream.invalid", "x-api-key")
	co := base("http://upstream.invalid/cohere", "")
	provs := map[string]*gateway.Provider{
		"oa": gateway.NewProvider("oa", "openai", nil,
			Endpoints{Chat: openai.Chat{}, Embeddings: embeddings.OpenAI, Responses: openai.Native{}}, oa.upstream),
		"claude": gateway.NewProvider("claude", "anthropic", nil, Endpoints{Chat: &anthropic.Chat{Version: "2023-06-01"}, Messages: anthropic.Native{Version: "2023-06-01"}}, claude.upstream),
		"co":     gateway.NewProvider("co", "cohere", nil, Endpoints{Rerank: rerank.Cohere}, co.upstream),
	}
	prices, err := pricing.Load(nil)
	if err != nil {
		b.Fatal(err)
	}
	a := &App{logger: zap.NewNop(), prices: prices, knownModels: map[string]struct{}{}, providers: provs,
		keys: map[[32]byte]*Key{keys.Digest(benchStaticKey): {Name: "bench", Owner: "bench"}},
		// Caddy's default storage, where a passed-through response's
		// pointer goes.
		storage: &certmagic.FileStorage{Path: b.TempDir()}, responseWrites: new(sync.WaitGroup), health: new(health)}
	a.staticByName = map[string]*Key{"bench": a.keys[keys.Digest(benchStaticKey)]}
	b.Cleanup(func() { a.waitResponseWrites(time.Minute) }) // before TempDir's removal
	mem := storagetest.NewMemory()
	a.managed = keys.NewManager(mem, "modelgate")
	withAccounts(a, mem)
	if err := a.provisionGateway(); err != nil {
		b.Fatal(err)
	}
	_, secret, err := a.managed.Create(context.Background(), keys.NewKey{Name: "bench-managed"})
	if err != nil {
		b.Fatal(err)
	}
	mod, err := ctx.LoadModuleByID("http.handlers.reverse_proxy", []byte(`{"upstreams":[{"dial":"upstream.invalid:80"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	plain := mod.(*reverseproxy.Handler)
	plain.Transport = up
	return &benchGateway{
		app: a, auth: &Auth{app: a, logger: zap.NewNop()}, plain: plain, managedKey: secret, bases: map[string]*ProviderBase{"oa": oa, "claude": claude, "co": co},
		handler: &Handler{app: a, MaxRequestBody: defaultMaxRequestBody, logger: zap.NewNop()},
		server:  &caddyhttp.Server{}, upstream: up,
	}
}

// noNext ends a handler chain.
var noNext = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })

// request is a client's request as Caddy's server hands it to the first
// handler.
func (g *benchGateway) request(w http.ResponseWriter, path string, body []byte, header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://gateway.example"+path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, g.server)
}

func (g *benchGateway) serveModelgate(w http.ResponseWriter, r *http.Request) error {
	return g.auth.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return g.handler.ServeHTTP(w, r, noNext)
	}))
}

func (g *benchGateway) servePlain(w http.ResponseWriter, r *http.Request) error {
	return g.plain.ServeHTTP(w, r, noNext)
}

func benchChatBody(model string, words int, stream bool) []byte {
	text := "Summarise the plot of Hamlet in one sentence please"
	if words > 0 {
		w := make([]string, words)
		for i := range w {
			w[i] = "word"
		}
		text = strings.Join(w, " ")
	}
	s := `{"model":"` + model + `","max_tokens":256,"messages":[{"role":"system","content":"You are a terse assistant."},{"role":"user","content":"` + text + `"}]`
	if stream {
		s += `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return []byte(s + "}")
}

// benchCJKBody is a chat request whose user message is about size bytes
// of Chinese prose, without a space or a newline.
func benchCJKBody(model string, size int) []byte {
	const sentence = "我们今天讨论的是人工智能在教育领域的应用和未来发展趋势，以及它对学生和教师的影响。"
	text := strings.Repeat(sentence, max(1, size/len(sentence)))
	return []byte(`{"model":"` + model + `","max_tokens":256,"messages":[{"role":"system","content":"You are a terse assistant."},{"role":"user","content":"` + text + `"}]}`)
}

// benchEmbeddingsBody is the harness's embeddings request: 64 inputs of
// ~30 words, 1,536 dimensions, in format ("float" or "base64").
func benchEmbeddingsBody(model, format string) []byte {
	b := []byte(`{"model":"` + model + `","dimensions":1536,"encoding_format":"` + format + `","input":[`)
	for i := range 64 {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"input %d: %s"`, i, strings.Repeat("word ", 30))
	}
	return append(b, "]}"...)
}

func benchResponsesBody(model string) []byte {
	return []byte(`{"model":"` + model + `","max_output_tokens":256,"instructions":"You are a terse assistant.","input":"Summarise the plot of Hamlet in one sentence please"}`)
}

// benchRerankBody is the harness's rerank request: 100 documents of ~60
// words, top 10.
func benchRerankBody(model string) []byte {
	b := []byte(`{"model":"` + model + `","query":"which document talks about word7 and word42","top_n":10,"documents":[`)
	for i := range 100 {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"document %d mentions word%d and word%d; %s"`, i, i%50, (i*7)%60, strings.Repeat("word ", 55))
	}
	return append(b, "]}"...)
}

// BenchmarkPerRequest sends one request per iteration through the whole
// gateway — modelgate_auth, the modelgate handler, the dispatcher, the
// provider's reverse_proxy, translation, metering and settling — or through
// plain reverse_proxy, to the same in-memory upstream (whose own work, a
// map lookup and a response, both include). The streams carry 50 events
// (ns/event, allocs/event). Compare modelgate's rows with reverse_proxy's:
// the difference is what the gateway adds per request, in the gateway's
// code alone (no network, no client); openai_pii_guard with openai, what
// a pii guard on requests and answers adds to a call. cpu-ns/op is the CPU time the
// process used per request (every thread, the garbage collector's
// included): on a machine shared with other work it is much steadier than
// ns/op, which counts the time the benchmark waited for a CPU.
func BenchmarkPerRequest(b *testing.B) {
	g := newBenchGateway(b)
	// The same app with a pii guard (every detector, mask) on requests
	// and answers: what a guard adds to a whole call.
	guarded := newBenchGateway(b)
	guarded.app.Guardrails = &guardrails.Config{Guards: []guardrails.GuardConfig{{Name: "pii", Type: "pii", Action: "mask"}}}
	guarded.rebuild(b)
	anthropicHdr := []string{"X-Api-Key", benchStaticKey}
	static := []string{"Authorization", "Bearer " + benchStaticKey}
	managed := []string{"Authorization", "Bearer " + g.managedKey}
	for _, bc := range []struct {
		name    string
		plain   bool
		guarded bool
		path    string
		body    []byte
		header  []string
		events  int // events the client gets (streams)
		expect  string
	}{
		{name: "reverse_proxy", plain: true, path: "/v1/chat/completions", body: benchChatBody("gpt-4o-mini", 0, false), expect: `"echo: Summarise`},
		{name: "openai", path: "/v1/chat/completions", body: benchChatBody("oa/gpt-4o-mini", 0, false), header: static, expect: `"echo: Summarise`},
		{name: "openai_pii_guard", guarded: true, path: "/v1/chat/completions", body: benchChatBody("oa/gpt-4o-mini", 0, false), header: static, expect: `"echo: Summarise`},
		{name: "openai_managed_key", path: "/v1/chat/completions", body: benchChatBody("oa/gpt-4o-mini", 0, false), header: managed, expect: `"echo: Summarise`},
		{name: "anthropic", path: "/v1/chat/completions", body: benchChatBody("claude/claude-sonnet-4-5", 0, false), header: static, expect: `"echo: Summarise`},
		{name: "reverse_proxy_stream", plain: true, path: "/v1/chat/completions", body: benchChatBody("gpt-4o-mini", 45, true), events: 50, expect: `[DONE]`},
		{name: "openai_stream", path: "/v1/chat/completions", body: benchChatBody("oa/gpt-4o-mini", 45, true), header: static, events: 50, expect: `[DONE]`},
		// The client did not ask for usage: the gateway asks for it and
		// strips it from every chunk.
		{name: "openai_stream_no_usage", path: "/v1/chat/completions", body: bytes.Replace(benchChatBody("oa/gpt-4o-mini", 45, true), []byte(`,"stream_options":{"include_usage":true}`), nil, 1), header: static, events: 49, expect: `[DONE]`},
		{name: "anthropic_stream", path: "/v1/chat/completions", body: benchChatBody("claude/claude-sonnet-4-5", 45, true), header: static, events: 50, expect: `[DONE]`},
		{name: "messages_passthrough", path: "/v1/messages", body: []byte(`{"model":"claude/claude-sonnet-4-5","max_tokens":256,"messages":[{"role":"user","content":"Summarise the plot of Hamlet in one sentence please"}]}`), header: anthropicHdr, expect: `"echo: Summarise`},
		// The harness's other scenarios (bench/cmd/loadbench): embeddings of 64
		// inputs of 1,536 dimensions in base64 (the OpenAI SDKs' default)
		// and in numbers, a Responses request passed through (store on:
		// the gateway keeps a pointer), rerank of 100 documents.
		{name: "reverse_proxy_embeddings_base64", plain: true, path: "/v1/embeddings", body: benchEmbeddingsBody("text-embedding-3-small", "base64"), expect: `"embedding"`},
		{name: "embeddings_base64", path: "/v1/embeddings", body: benchEmbeddingsBody("oa/text-embedding-3-small", "base64"), header: static, expect: `"embedding"`},
		{name: "embeddings_float", path: "/v1/embeddings", body: benchEmbeddingsBody("oa/text-embedding-3-small", "float"), header: static, expect: `"embedding"`},
		{name: "reverse_proxy_responses", plain: true, path: "/v1/responses", body: benchResponsesBody("gpt-4o-mini"), expect: `echo: Summarise`},
		{name: "responses_passthrough", path: "/v1/responses", body: benchResponsesBody("oa/gpt-4o-mini"), header: static, expect: `echo: Summarise`},
		{name: "reverse_proxy_rerank", plain: true, path: "/cohere/v2/rerank", body: benchRerankBody("rerank-v3.5"), expect: `relevance_score`},
		{name: "rerank", path: "/v1/rerank", body: benchRerankBody("co/rerank-v3.5"), header: static, expect: `relevance_score`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			serve := g.serveModelgate
			switch {
			case bc.plain:
				serve = g.servePlain
			case bc.guarded:
				serve = guarded.serveModelgate
			}
			w := &sink{header: make(http.Header), keep: true}
			if err := serve(w, g.request(w, bc.path, bc.body, bc.header...)); err != nil || w.status != 200 || !bytes.Contains(w.body.Bytes(), []byte(bc.expect)) {
				b.Fatalf("status %d, error %v: %.400s", w.status, err, w.body.Bytes())
			}
			if bc.events > 0 {
				if n := bytes.Count(w.body.Bytes(), []byte("\n\n")); n != bc.events {
					b.Fatalf("%d events, want %d: %s", n, bc.events, w.body.Bytes())
				}
			}
			b.ReportAllocs()
			var allocsBefore, allocsAfter runtimeAllocs
			allocsBefore.read()
			start := time.Now()
			cpuBefore, cpuOK := processCPU()
			for b.Loop() {
				w := &sink{header: make(http.Header)}
				if err := serve(w, g.request(w, bc.path, bc.body, bc.header...)); err != nil || w.status != 200 {
					b.Fatalf("status %d, error %v", w.status, err)
				}
			}
			if cpuAfter, ok := processCPU(); ok && cpuOK {
				b.ReportMetric(float64(cpuAfter-cpuBefore)/float64(b.N), "cpu-ns/op")
			}
			if bc.events > 0 {
				allocsAfter.read()
				n := float64(b.N * bc.events)
				b.ReportMetric(float64(time.Since(start).Nanoseconds())/n, "ns/event")
				b.ReportMetric(float64(allocsAfter.mallocs-allocsBefore.mallocs)/n, "allocs/event")
			}
		})
	}
}

// BenchmarkAuth is modelgate_auth's work for one request: the key's
// digest, the lookup (static keys, then managed ones), the placeholders.
func BenchmarkAuth(b *testing.B) {
	g := newBenchGateway(b)
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	for _, bc := range []struct{ name, key string }{
		{"static", benchStaticKey},
		{"managed", g.managedKey},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w := &sink{header: make(http.Header)}
			r := g.request(w, "/v1/chat/completions", nil, "Authorization", "Bearer "+bc.key)
			header := r.Header["Authorization"]
			b.ReportAllocs()
			for b.Loop() {
				r.Header["Authorization"] = header // modelgate_auth removes it
				if err := g.auth.ServeHTTP(w, r, next); err != nil || w.status != 0 || requestKey(r) == nil {
					b.Fatalf("refused: %d %v", w.status, err)
				}
			}
		})
	}
}

// BenchmarkSettle is the host's part of settling one answered call:
// the metrics of what it used and cost (the gateway's Observer), and its
// access log fields and placeholders. (The gateway's part, the usage
// records, is gateway's BenchmarkAdmitQuota/record_usage.)
func BenchmarkSettle(b *testing.B) {
	g := newBenchGateway(b)
	p := g.app.providers["oa"]
	w := &sink{header: make(http.Header)}
	r := g.request(w, "/v1/chat/completions", nil)
	extra := new(caddyhttp.ExtraLogFields)
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.ExtraLogFieldsCtxKey, extra))
	key := &Key{Name: "bench", Owner: "bench"}
	c := &gateway.Call{API: gateway.APIChat, Key: key}
	t := gateway.Target{Provider: p, Model: "gpt-4o-mini"}
	o := &gateway.Outcome{Status: 200, Start: time.Now(), Target: t, Tried: []gateway.Target{t}, Key: key, Settled: true,
		Usage: gateway.Usage{Prompt: 1200, Cached: 200, Completion: 300, Known: true}}
	o.Cost, o.Priced = g.app.prices.Cost("openai", "gpt-4o-mini", pricing.Usage{PromptTokens: 1200, CachedTokens: 200, CompletionTokens: 300})
	ob := observer{g.app}
	b.ReportAllocs()
	for b.Loop() {
		ob.Answered(c, o)
		logSettled(r, o)
	}
}

// BenchmarkGuardDecisions is counting one guard decision in the
// decisions metric, as the gateway counts each decision of a call: in the
// guard's tally, which the metric reads when it is scraped; warm and with
// the caches cold (evicted-ns/op).
func BenchmarkGuardDecisions(b *testing.B) {
	eng, err := guardrails.New(guardrails.Config{Guards: []guardrails.GuardConfig{{Name: "bench-pii", Type: "pii"}}},
		guardrails.Options{Tally: guardTally})
	if err != nil {
		b.Fatal(err)
	}
	var r guardrails.Result
	eng.Check(context.Background(), &r, guardrails.Chat, guardrails.Request, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), &guardrails.Scope{})
	ds := r.Decisions
	if len(ds) != 1 || ds[0].Action != guardrails.Allow {
		b.Fatalf("decisions %+v", ds)
	}
	b.Run("tally", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			eng.Count(ds)
		}
	})
	b.Run("tally/evicted", func(b *testing.B) {
		b.ReportMetric(evicted.Ops(b, func() { eng.Count(ds) }), "evicted-ns/op")
	})
}

// runtimeAllocs reads the process's count of allocations.
type runtimeAllocs struct{ mallocs uint64 }

func (a *runtimeAllocs) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	a.mallocs = ms.Mallocs
}

// serve sends method path (with its query) and body through
// modelgate_auth and modelgate with the key.
func (g *benchGateway) serve(t testing.TB, method, target string, body []byte, key string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(method, "http://gateway.example"+target, bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), rec, g.server)
	if err := g.serveModelgate(rec, r); err != nil {
		t.Fatal(err)
	}
	return rec
}
