package gateway

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/respcache"
	"github.com/modelgate/modelgate/usage"
)

// cacheObserver counts what the cache told the observer.
type cacheObserver struct {
	noObserver
	lookups map[string]int // "<api> <status>"
}

func (o *cacheObserver) CacheLookup(api, status string) { o.lookups[api+" "+status]++ }

// withCache turns g's response cache on, in memory, and returns the
// observer that counts its lookups.
func (g *testGateway) withCache(tb testing.TB) *cacheObserver {
	tb.Helper()
	c, err := respcache.New(respcache.Config{TTL: time.Minute, MaxEntries: 100}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	obs := &cacheObserver{lookups: map[string]int{}}
	g.cfg.Cache, g.cfg.Observer = c, obs
	g.rebuild(tb)
	return obs
}

// sent is how many requests g's provider name was sent.
func (g *testGateway) sent(name string) int { return len(g.upstreams[name].requests()) }

// serveWith serves a call of api with body by key, with the client's
// headers h (name, value, …).
func (g *testGateway) serveWith(tb testing.TB, api API, body []byte, key *Key, h ...string) (*Outcome, *recordingSink) {
	tb.Helper()
	header := http.Header{}
	for i := 0; i+1 < len(h); i += 2 {
		header.Add(h[i], h[i+1])
	}
	sink := &recordingSink{}
	o := &Outcome{}
	g.Serve(context.Background(), &Call{API: api, Body: body, Header: header, Key: key, Sink: sink, Path: "/test"}, o)
	return o, sink
}

// TestCacheHit: on every cached API, a repeat of a request (its JSON laid
// out otherwise) is answered from the cache with the first answer, no
// provider call, x-modelgate-cache hit after miss; the observer is told.
func TestCacheHit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		api      API
		provider string
		body     string
		again    string // the same request, laid out otherwise
	}{
		{"chat", APIChat, "oa", `{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":0.5}`,
			`{ "temperature": 0.5, "messages": [ {"content":"hi", "role":"user"} ], "model": "oa/gpt-4o-mini" }`},
		{"embeddings", APIEmbeddings, "oa", `{"model":"oa/text-embedding-3-small","input":["a","b"]}`,
			`{"input":["a","b"],"model":"oa/text-embedding-3-small"}`},
		{"rerank", APIRerank, "co", `{"model":"co/rerank-v3.5","query":"which?","documents":["one","two"]}`,
			`{"documents":["one","two"],"query":"which?","model":"co/rerank-v3.5"}`},
		{"responses", APIResponses, "oa", `{"model":"oa/gpt-4o-mini","input":"hi","store":false}`,
			`{"store":false,"input":"hi","model":"oa/gpt-4o-mini"}`},
		{"messages", APIMessages, "claude", `{"model":"claude/claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`,
			`{"max_tokens":100,"model":"claude/claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTestGateway(t)
			obs := g.withCache(t)
			first, _ := g.serveWith(t, tc.api, []byte(tc.body), g.static)
			if first.Status != 200 || first.Cache != respcache.StatusMiss || first.Header.Get("X-Modelgate-Cache") != "miss" {
				t.Fatalf("first: %d %q %s", first.Status, first.Header.Get("X-Modelgate-Cache"), first.Body)
			}
			second, _ := g.serveWith(t, tc.api, []byte(tc.again), g.static)
			if second.Status != 200 || second.Header.Get("X-Modelgate-Cache") != "hit" || string(second.Body) != string(first.Body) {
				t.Fatalf("second: %d %q %s, want the first answer %s", second.Status, second.Header.Get("X-Modelgate-Cache"), second.Body, first.Body)
			}
			if n := g.sent(tc.provider); n != 1 {
				t.Errorf("the provider was sent %d requests, want 1", n)
			}
			if second.Target.String() != first.Target.String() || !second.Settled || second.Usage != first.Usage {
				t.Errorf("the hit's target %q usage %+v, want %q %+v", second.Target, second.Usage, first.Target, first.Usage)
			}
			label := tc.api.String()
			if obs.lookups[label+" miss"] != 1 || obs.lookups[label+" hit"] != 1 {
				t.Errorf("the observer was told %v", obs.lookups)
			}
		})
	}
}

// TestCacheKey: whatever shapes the answer — the model, the messages, the
// tools, a parameter, the account — is another entry; a transport member
// (user) is not.
func TestCacheKey(t *testing.T) {
	g := newTestGateway(t)
	g.withCache(t)
	base := chatBody("oa/gpt-4o-mini", `,"temperature":0.5`, "hi")
	if o, _ := g.serveWith(t, APIChat, base, g.static); o.Status != 200 {
		t.Fatalf("%d %s", o.Status, o.Body)
	}
	tool := `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	other := &Key{Name: "other", Owner: "another-account"}
	for _, tc := range []struct {
		name string
		body []byte
		key  *Key
		want string
	}{
		{"another model", chatBody("oa/gpt-4o", `,"temperature":0.5`, "hi"), g.static, "miss"},
		{"another message", chatBody("oa/gpt-4o-mini", `,"temperature":0.5`, "hello"), g.static, "miss"},
		{"tools", chatBody("oa/gpt-4o-mini", `,"temperature":0.5`+tool, "hi"), g.static, "miss"},
		{"another parameter", chatBody("oa/gpt-4o-mini", `,"temperature":0.7`, "hi"), g.static, "miss"},
		{"another account", base, other, "miss"},
		{"the same request, another end user", chatBody("oa/gpt-4o-mini", `,"temperature":0.5,"user":"u-2"`, "hi"), g.static, "hit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := g.serveWith(t, APIChat, tc.body, tc.key)
			if o.Status != 200 || o.Cache != tc.want {
				t.Errorf("%d %s: %q, want %q", o.Status, o.Body, o.Cache, tc.want)
			}
		})
	}
	// The other account's own repeat is its own hit.
	if o, _ := g.serveWith(t, APIChat, base, other); o.Cache != "hit" {
		t.Errorf("the other account's repeat: %q", o.Cache)
	}
}

// TestCacheControl: no-cache goes to the provider and stores the fresh
// answer; no-store neither reads nor writes; both say bypass.
func TestCacheControl(t *testing.T) {
	g := newTestGateway(t)
	obs := g.withCache(t)
	body := chatBody("oa/gpt-4o-mini", "", "hi")
	step := func(want string, h ...string) {
		t.Helper()
		if o, _ := g.serveWith(t, APIChat, body, g.static, h...); o.Status != 200 || o.Header.Get("X-Modelgate-Cache") != want {
			t.Fatalf("%v: %d %q, want %q", h, o.Status, o.Header.Get("X-Modelgate-Cache"), want)
		}
	}
	step("bypass", "Cache-Control", "no-store")
	step("miss") // no-store stored nothing
	step("hit")
	step("bypass", "Cache-Control", "No-Cache")
	step("hit")
	if n := g.sent("oa"); n != 3 {
		t.Errorf("the provider was sent %d requests, want 3", n)
	}
	other := chatBody("oa/gpt-4o-mini", "", "fresh")
	if o, _ := g.serveWith(t, APIChat, other, g.static, "Cache-Control", "no-cache"); o.Cache != "bypass" {
		t.Fatalf("no-cache: %q", o.Cache)
	}
	if o, _ := g.serveWith(t, APIChat, other, g.static); o.Cache != "hit" {
		t.Errorf("after no-cache, the fresh answer was not stored: %q", o.Cache)
	}
	if obs.lookups["chat_completions bypass"] != 3 {
		t.Errorf("lookups: %v", obs.lookups)
	}
}

// TestCacheNotErrors: no error is stored — a provider's 5xx, its 4xx, a
// stream cut off or broken by an error event: each repeat goes to the
// provider again.
func TestCacheNotErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"500", chatBody("oa/fail-500", "", "hi")},
		{"429", chatBody("oa/fail-429", "", "hi")},
		{"400", chatBody("oa/gpt-4o-mini", `,"temperature":5`, "hi")},
		{"a stream cut off", chatBody("oa/cutoff", `,"stream":true`, "hi")},
		{"a stream's error event", chatBody("oa/midstream-error", `,"stream":true`, "hi")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTestGateway(t)
			g.withCache(t)
			for i := range 2 {
				o, s := g.serveWith(t, APIChat, tc.body, g.static)
				if o.Cache != "miss" {
					t.Fatalf("request %d: %d %q %s", i+1, o.Status, o.Cache, answer(o, s))
				}
			}
			if n := g.sent("oa"); n != 2 {
				t.Errorf("the provider was sent %d requests, want 2", n)
			}
		})
	}
}

// TestCacheStreams: a streamed request for an answer stored from a plain
// one is replayed as the API's events (chat with its usage chunk when
// asked, Responses, Messages); a plain request gets the answer a stream
// stored, rebuilt.
func TestCacheStreams(t *testing.T) {
	for _, tc := range []struct {
		name       string
		api        API
		provider   string
		fields     string // the request's, but for stream
		streamed   string // the streamed request's own fields
		text       string // the answer's, in one delta of the replay
		end, usage string // in the replay
	}{
		{"chat", APIChat, "oa", `"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"hello there"}]`, "",
			"echo: hello there", "data: [DONE]", ""},
		{"chat with usage", APIChat, "oa", `"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"hello there"}]`,
			`"stream_options":{"include_usage":true},`, "echo: hello there", "data: [DONE]", `"prompt_tokens":2`},
		{"responses", APIResponses, "oa", `"model":"oa/gpt-4o-mini","store":false,"input":"hello there"`, "",
			"echo: hello there", "event: response.completed", ""},
		{"messages", APIMessages, "claude", `"model":"claude/claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"hello there"}]`, "",
			"echo: hello there", "event: message_stop", ""},
	} {
		t.Run(tc.name+", plain then streamed", func(t *testing.T) {
			g := newTestGateway(t)
			g.withCache(t)
			plain, _ := g.serveWith(t, tc.api, []byte("{"+tc.fields+"}"), g.static)
			if plain.Status != 200 || plain.Cache != "miss" {
				t.Fatalf("plain: %d %s", plain.Status, plain.Body)
			}
			o, s := g.serveWith(t, tc.api, []byte(`{"stream":true,`+tc.streamed+tc.fields+"}"), g.static)
			got := s.body.String()
			if o.Cache != "hit" || !o.Streamed || s.status != 200 || o.Header.Get("Content-Type") != "text/event-stream" ||
				!strings.Contains(got, tc.text) || !strings.Contains(got, tc.end) || !strings.Contains(got, tc.usage) || s.flushes == 0 {
				t.Fatalf("streamed: %q %d %v\n%s", o.Cache, s.status, o.Header, got)
			}
			if tc.usage == "" && tc.api == APIChat && strings.Contains(got, `"usage":{`) {
				t.Errorf("a usage chunk nobody asked for:\n%s", got)
			}
			if n := g.sent(tc.provider); n != 1 {
				t.Errorf("the provider was sent %d requests, want 1", n)
			}
		})
		t.Run(tc.name+", streamed then plain", func(t *testing.T) {
			g := newTestGateway(t)
			g.withCache(t)
			o, s := g.serveWith(t, tc.api, []byte(`{"stream":true,`+tc.streamed+tc.fields+"}"), g.static)
			if o.Cache != "miss" || !o.Streamed || !strings.Contains(s.body.String(), "there") {
				t.Fatalf("streamed: %d %q\n%s", o.Status, o.Cache, s.body.String())
			}
			plain, _ := g.serveWith(t, tc.api, []byte("{"+tc.fields+"}"), g.static)
			if plain.Status != 200 || plain.Cache != "hit" || !strings.Contains(string(plain.Body), tc.text) {
				t.Fatalf("plain: %d %q %s", plain.Status, plain.Cache, plain.Body)
			}
			if plain.Usage != o.Usage {
				t.Errorf("the hit's usage %+v, the stream's %+v", plain.Usage, o.Usage)
			}
		})
	}
}

// TestCacheHitSettles: a hit counts against the key's requests per
// minute (the third request of a key allowed two, a hit, is refused
// 429), its tokens against tokens per minute, and is in the usage records
// as a cache hit, priced at cache_hit ($0 unless configured).
func TestCacheHitSettles(t *testing.T) {
	g := newTestGateway(t)
	g.withCache(t)
	g.withLimits(t, staticPolicies{key: quota.Subject{Limits: quota.Limits{RequestsPerMinute: 2}}})
	body := chatBody("oa/gpt-4o-mini", "", "hi")
	first, _ := g.serveWith(t, APIChat, body, g.static)
	hit, _ := g.serveWith(t, APIChat, body, g.static)
	if first.Cache != "miss" || hit.Cache != "hit" || hit.Cost != 0 || !hit.Priced {
		t.Fatalf("%q %q: cost %v priced %v", first.Cache, hit.Cache, hit.Cost, hit.Priced)
	}
	if o, _ := g.serveWith(t, APIChat, body, g.static); o.Status != http.StatusTooManyRequests || o.Cache != "" {
		t.Fatalf("the third request: %d %q %s, want 429 before the cache", o.Status, o.Cache, o.Body)
	}
	rep, err := g.cfg.Usage.Query(context.Background(), usage.Query{})
	if err != nil {
		t.Fatal(err)
	}
	total := rep.Total
	if total.Requests != 2 || total.CacheHits != 1 || total.InputTokens != 2*first.Usage.Prompt || total.Cost != first.Cost {
		t.Errorf("usage %+v, want 2 requests, 1 cache hit, the miss's cost %v", total, first.Cost)
	}
}

// TestCacheHitPrice: a configured cache_hit price is what a hit costs.
func TestCacheHitPrice(t *testing.T) {
	g := newTestGateway(t)
	rate, err := pricing.ParseRate("2")
	if err != nil {
		t.Fatal(err)
	}
	if g.cfg.Prices, err = pricing.Load(&pricing.Config{CacheHit: &rate}); err != nil {
		t.Fatal(err)
	}
	g.withCache(t)
	body := chatBody("oa/gpt-4o-mini", "", "hi")
	g.serveWith(t, APIChat, body, g.static)
	o, _ := g.serveWith(t, APIChat, body, g.static)
	if want, _ := pricing.ParseMoney("0.002"); o.Cache != "hit" || o.Cost != want || !o.Priced {
		t.Errorf("%q: cost %v priced %v, want $0.002 (cache_hit $2 per 1,000)", o.Cache, o.Cost, o.Priced)
	}
}

// TestCacheOff: without a cache nothing is looked up and no header is
// set; batch lines and calls without a key are never cached.
func TestCacheOff(t *testing.T) {
	g := newTestGateway(t)
	body := chatBody("oa/gpt-4o-mini", "", "hi")
	if o, _ := g.serveWith(t, APIChat, body, g.static); o.Cache != "" || o.Header.Get("X-Modelgate-Cache") != "" {
		t.Errorf("cache off: %q %v", o.Cache, o.Header)
	}
	g.withCache(t)
	for range 2 {
		if o, _ := g.serveWith(t, APIChat, body, nil); o.Cache != "" {
			t.Errorf("no key: %q", o.Cache)
		}
	}
	o := &Outcome{}
	g.Serve(context.Background(), &Call{API: APIChat, Body: body, Key: g.static, Batch: &BatchLine{BatchID: "b", CustomID: "1"}}, o)
	if o.Cache != "" || o.Status != 200 {
		t.Errorf("a batch line: %d %q", o.Status, o.Cache)
	}
	if n := g.sent("oa"); n != 4 {
		t.Errorf("the provider was sent %d requests, want 4", n)
	}
}

// BenchmarkCache is one chat call served whole by the core, on the fake
// provider in memory: with the cache off, for reference; a miss (looked
// up, not found, the provider answers, the answer is stored: each request
// another, the cache full, so a store evicts); a stored answer refreshed
// (no-cache: not looked up, stored); a hit; a streamed request's hit,
// replayed as events.
func BenchmarkCache(b *testing.B) {
	const text = "Summarise the plot of Hamlet in one sentence please, request 000000000"
	body := chatBody("oa/gpt-4o-mini", `,"temperature":0.5,"max_tokens":64`, text)
	stream := chatBody("oa/gpt-4o-mini", `,"temperature":0.5,"max_tokens":64,"stream":true`, text)
	for _, bc := range []struct {
		name        string
		cache, vary bool
		body        []byte
		h           http.Header
		want        string
	}{
		{"off", false, false, body, nil, ""},
		{"miss", true, true, body, nil, "miss"},
		{"refresh", true, false, body, http.Header{"Cache-Control": {"no-cache"}}, "bypass"},
		{"hit", true, false, body, nil, "hit"},
		{"hit_streamed", true, false, stream, nil, "hit"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			g := newTestGateway(b)
			if bc.cache {
				g.withCache(b)
				g.serveWith(b, APIChat, body, g.static)
			}
			c := &Call{API: APIChat, Body: bc.body, Header: bc.h, Key: g.static, Sink: discardSink{}, Path: "/test"}
			if bc.vary {
				c.Body = bytes.Clone(bc.body)
			}
			ctx := context.Background()
			digits := bytes.Index(c.Body, []byte("000000000"))
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				if bc.vary {
					n++
					_ = strconv.AppendInt(c.Body[:digits], int64(100_000_000+n), 10) // nine digits, in place
				}
				o := &Outcome{}
				g.Serve(ctx, c, o)
				if o.Status != 200 || o.Cache != bc.want {
					b.Fatalf("%d %q %s", o.Status, o.Cache, o.Body)
				}
			}
		})
	}
}

// TestCacheResponsesStored: a hit of a Responses request that stores its
// response gives the stored response's id, which GET /v1/responses/{id}
// reads and previous_response_id continues.
func TestCacheResponsesStored(t *testing.T) {
	g := newTestGateway(t)
	g.withCache(t)
	body := []byte(`{"model":"claude/claude-sonnet-4-5","max_output_tokens":256,"input":"hello there"}`)
	first, _ := g.serveWith(t, APIResponses, body, g.static)
	hit, _ := g.serveWith(t, APIResponses, body, g.static)
	id := gjson.GetBytes(hit.Body, "id").Str
	if first.Status != 200 || hit.Cache != "hit" || id == "" || id != gjson.GetBytes(first.Body, "id").Str {
		t.Fatalf("%d %q %s", hit.Status, hit.Cache, hit.Body)
	}
	g.cfg.Responses.Writes.Wait()
	o := &Outcome{}
	g.StoredResponse(context.Background(), StoredRequest{Method: http.MethodGet, Owner: g.static.StorageOwner(), ID: id}, o)
	if o.Status != 200 || gjson.GetBytes(o.Body, "id").Str != id {
		t.Errorf("GET %s: %d %s", id, o.Status, o.Body)
	}
	next, _ := g.serveWith(t, APIResponses, []byte(`{"model":"claude/claude-sonnet-4-5","previous_response_id":"`+id+`","input":"and then?"}`), g.static)
	if next.Status != 200 || next.Cache != "miss" {
		t.Errorf("continued: %d %q %s", next.Status, next.Cache, next.Body)
	}
}
