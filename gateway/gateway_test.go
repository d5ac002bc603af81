package gateway

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/embeddings"
	"github.com/modelgate/modelgate/providers/openai"
	"github.com/modelgate/modelgate/providers/providertest"
	"github.com/modelgate/modelgate/providers/rerank"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/state"
	"github.com/modelgate/modelgate/usage"
)

// These helpers serve calls through a gateway whose providers are the fake
// providers of providertest, in memory: the core's own path, with no Caddy
// and no network.

// memUpstream is a provider's Upstream in memory: the fake provider's
// handler, sent each request as the provider's reverse_proxy would send it
// (the base URL's path, the query, the headers, a credential the fake
// takes), writing its answer into the gateway's writer.
type memUpstream struct {
	base string
	h    http.Handler

	mu   sync.Mutex
	sent []*http.Request // with record
}

const testProviderKey = "sk-test-provider-key-0123456789"

func (u *memUpstream) Send(ctx context.Context, req providers.Request, stream bool, w http.ResponseWriter) error {
	method := req.Method
	if method == "" {
		method = http.MethodPost
	}
	target := "http://upstream.invalid" + u.base + req.Path
	if req.Query != "" {
		target += "?" + req.Query
	}
	r := httptest.NewRequestWithContext(ctx, method, target, bytes.NewReader(req.Body))
	r.Header.Set("Content-Type", "application/json")
	if stream {
		r.Header.Set("Accept", "text/event-stream")
	}
	for k, v := range req.Header {
		r.Header[k] = v
	}
	// The provider's credential, where its API takes it.
	if strings.HasPrefix(req.Path, "/v1/messages") {
		r.Header.Set("X-Api-Key", testProviderKey)
	} else {
		r.Header.Set("Authorization", "Bearer "+testProviderKey)
	}
	u.mu.Lock()
	u.sent = append(u.sent, r)
	u.mu.Unlock()
	u.h.ServeHTTP(w, r)
	return nil
}

// requests returns what u was sent.
func (u *memUpstream) requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.sent...)
}

// testGateway is a gateway with an OpenAI, an Anthropic and a Cohere
// provider on the fake providers, a static key and a managed one.
type testGateway struct {
	*Gateway
	cfg        Config
	upstreams  map[string]*memUpstream
	static     *Key
	managedKey string // the managed key's secret
	managed    *Key
}

// newTestGateway makes a testGateway; change its cfg and rebuild it to try
// other settings.
func newTestGateway(tb testing.TB) *testGateway {
	tb.Helper()
	fake := providertest.New(providertest.Options{NoRecord: true})
	ups := map[string]*memUpstream{"oa": {base: "/v1", h: fake}, "claude": {h: fake}, "co": {base: "/cohere", h: fake}}
	provs := map[string]*Provider{
		"oa": NewProvider("oa", "openai", nil, Endpoints{Chat: openai.Chat{}, Embeddings: embeddings.OpenAI, Responses: openai.Native{}}, ups["oa"]),
		"claude": NewProvider("claude", "anthropic", nil, Endpoints{Chat: &anthropic.Chat{Version: "2023-06-01"},
			Messages: anthropic.Native{Version: "2023-06-01"}}, ups["claude"]),
		"co": NewProvider("co", "cohere", nil, Endpoints{Rerank: rerank.Cohere}, ups["co"]),
	}
	prices, err := pricing.Load(nil)
	if err != nil {
		tb.Fatal(err)
	}
	managed := keys.NewManager(storagetest.NewMemory(), "modelgate")
	mk, secret, err := managed.Create(context.Background(), keys.NewKey{Name: "test-managed"})
	if err != nil {
		tb.Fatal(err)
	}
	static := &Key{Name: "bench", Owner: "bench"}
	g := &testGateway{upstreams: ups, static: static, managedKey: secret, managed: FromManaged(mk),
		cfg: Config{Providers: provs, Prices: prices, Managed: managed, StaticKeys: map[string]*Key{"bench": static},
			Responses: ResponseStore{Storage: storagetest.NewMemory(), ID: tb.Name(), Writes: new(sync.WaitGroup), Now: true},
			Logger:    zap.NewNop()}}
	g.rebuild(tb)
	return g
}

// rebuild makes g's gateway anew of g.cfg.
func (g *testGateway) rebuild(tb testing.TB) {
	tb.Helper()
	gw, err := New(g.cfg)
	if err != nil {
		tb.Fatal(err)
	}
	g.Gateway = gw
}

// withLimits gives g's keys the policies p, counted on an in-process
// state, with usage accounting.
func (g *testGateway) withLimits(tb testing.TB, p Policies) {
	tb.Helper()
	rec, err := usage.New(storagetest.NewMemory(), usage.Options{Instance: "test", Prefix: "modelgate/usage"})
	if err != nil {
		tb.Fatal(err)
	}
	q, err := quota.New(quota.Config{State: state.NewLocal(), Spender: rec})
	if err != nil {
		tb.Fatal(err)
	}
	g.cfg.Usage, g.cfg.Limits = rec, Limits{Quota: q, Policies: p}
	g.rebuild(tb)
}

// recordingSink is a client's connection that keeps what a stream sent.
type recordingSink struct {
	status  int
	body    bytes.Buffer
	flushes int
}

func (s *recordingSink) WriteHeader(status int)      { s.status = status }
func (s *recordingSink) Write(p []byte) (int, error) { return s.body.Write(p) }
func (s *recordingSink) Flush() error                { s.flushes++; return nil }

// serve serves a call of api with body, by key (nil: none), and returns its
// outcome and, for a stream, what the sink got.
func (g *testGateway) serve(tb testing.TB, api API, body []byte, key *Key) (*Outcome, *recordingSink) {
	tb.Helper()
	sink := &recordingSink{}
	o := &Outcome{}
	g.Serve(context.Background(), &Call{API: api, Body: body, Key: key, Sink: sink, Path: "/test"}, o)
	return o, sink
}

// answer is what the client got: the outcome's body, or the stream.
func answer(o *Outcome, s *recordingSink) string {
	if o.Streamed {
		return s.body.String()
	}
	return string(o.Body)
}

// chatBody is a chat request of model with fields added at its top level
// and one user message.
func chatBody(model, fields, content string) []byte {
	return fmt.Appendf(nil, `{"model":%q%s,"messages":[{"role":"user","content":%q}]}`, model, fields, content)
}

// staticPolicies is a Policies of one policy for every key, none for owners.
type staticPolicies struct {
	key           quota.Subject // its ID and Name are the key's
	allowUnpriced bool
}

func (p staticPolicies) Subjects(k *Key) quota.Subjects {
	s := p.key
	s.ID, s.Name = k.CountedAs(), k.Name
	return quota.Subjects{Key: s}
}

func (p staticPolicies) AllowsUnpriced() bool { return p.allowUnpriced }

// budgetOf is a daily budget of usd dollars for every key.
func budgetOf(tb testing.TB, usd string) Policies {
	tb.Helper()
	amount, err := pricing.ParseMoney(usd)
	if err != nil {
		tb.Fatal(err)
	}
	return staticPolicies{key: quota.Subject{Budget: quota.Budget{Amount: amount, Period: quota.Day}}}
}

// tpmOf is a tokens-per-minute limit of n for every key.
func tpmOf(n int64) Policies {
	return staticPolicies{key: quota.Subject{Limits: quota.Limits{TokensPerMinute: n}}}
}

func TestServeAnswers(t *testing.T) {
	g := newTestGateway(t)
	for _, tc := range []struct {
		name string
		api  API
		body []byte
		want string
		used Usage
	}{
		{"chat, passed through", APIChat, chatBody("oa/gpt-4o-mini", "", "hello there"), `"echo: hello there"`, Usage{Prompt: 2, Completion: 4, Known: true}},
		{"chat, translated", APIChat, chatBody("claude/claude-sonnet-4-5", `,"max_tokens":100`, "hello there"), `"echo: hello there"`, Usage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, s := g.serve(t, tc.api, tc.body, g.static)
			if o.Status != 200 || !strings.Contains(answer(o, s), tc.want) || !o.Settled || !o.Usage.Known || o.Target.Provider == nil {
				t.Fatalf("%d %s %+v", o.Status, answer(o, s), o)
			}
		})
	}
}
