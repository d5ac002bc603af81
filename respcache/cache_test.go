package respcache

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/state"
)

const storedChat = `{"id":"chatcmpl-1","object":"chat.completion","created":1750000000,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`

// stores are the Stores the cache runs on, each made fresh for a test:
// in memory, and on in-process Values (Redis in cache_redis_test.go).
func stores(clk *clock) map[string]func(t *testing.T) Store {
	return map[string]func(t *testing.T) Store{
		"memory": func(t *testing.T) Store { return newMemory(Config{}, clk.now) },
		"shared": func(t *testing.T) Store { return NewShared(state.NewLocalValues()) },
	}
}

func newCache(t *testing.T, c Config, s Store, clk *clock) *Cache {
	t.Helper()
	cache, err := New(c, s)
	if err != nil {
		t.Fatal(err)
	}
	cache.now = clk.now
	return cache
}

func TestCacheStoreLookup(t *testing.T) {
	for name, open := range stores(newClock()) {
		t.Run(name, func(t *testing.T) { testStoreLookup(t, open(t)) })
	}
}

func testStoreLookup(t *testing.T, s Store) {
	clk := newClock()
	c := newCache(t, Config{TTL: time.Minute}, s, clk)
	ctx := context.Background()
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}]}`
	alice := mustKey(t, Request{Account: "alice", API: Chat, Model: "openai/gpt-4o", Body: []byte(body)})
	bob := mustKey(t, Request{Account: "bob", API: Chat, Model: "openai/gpt-4o", Body: []byte(body)})

	if _, ok, err := c.Lookup(ctx, alice); ok || err != nil {
		t.Fatalf("an empty cache hits: %v, %v", ok, err)
	}
	u := Usage{Prompt: 9, Cached: 4, CacheWrite: 3, CacheWrite1h: 2, Completion: 1, Reasoning: 1}
	if err := c.Store(ctx, alice, Chat, Entry{Body: []byte(storedChat), Usage: u, Provider: "openai", Model: "gpt-4o-2024-08-06"}); err != nil {
		t.Fatal(err)
	}
	e, ok, err := c.Lookup(ctx, alice)
	if err != nil || !ok {
		t.Fatalf("Lookup after Store: %v, %v", ok, err)
	}
	if string(e.Body) != storedChat || e.Usage != u || e.Provider != "openai" || e.Model != "gpt-4o-2024-08-06" || !e.Created.Equal(clk.now()) {
		t.Fatalf("entry = %+v", e)
	}
	// Never across accounts.
	if _, ok, _ := c.Lookup(ctx, bob); ok {
		t.Fatal("another account's request hits")
	}
	// The ttl counts from Store, whatever the store's own expiry.
	clk.advance(time.Minute)
	if _, ok, _ := c.Lookup(ctx, alice); ok {
		t.Fatal("an entry is served at its ttl")
	}
}

// A ttl shortened by a new configuration applies to entries stored
// before it.
func TestCacheShorterTTL(t *testing.T) {
	clk := newClock()
	s := newMemory(Config{}, clk.now)
	ctx := context.Background()
	long := newCache(t, Config{TTL: time.Hour}, s, clk)
	k := keyN(1)
	if err := long.Store(ctx, k, Chat, entryOf(storedChat)); err != nil {
		t.Fatal(err)
	}
	short := newCache(t, Config{TTL: time.Minute}, s, clk)
	clk.advance(2 * time.Minute)
	if _, ok, _ := short.Lookup(ctx, k); ok {
		t.Fatal("an entry older than the new ttl is served")
	}
	if _, ok, _ := long.Lookup(ctx, k); !ok {
		t.Fatal("the entry is gone from the store")
	}
}

func TestCacheRefuses(t *testing.T) {
	clk := newClock()
	c := newCache(t, Config{MaxEntrySize: 400}, nil, clk)
	ctx := context.Background()
	big := `{"object":"list","data":[` + strings.Repeat(`{"object":"embedding","index":0,"embedding":[0.1,0.2]},`, 10) + `1]}`
	if err := c.Store(ctx, keyN(1), Embeddings, entryOf(big)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a body above max_entry_size: %v, want ErrTooLarge", err)
	}
	for _, tt := range []struct {
		api  API
		body string
		ok   bool
	}{
		{Chat, storedChat, true},
		{Chat, `{"error":{"message":"rate limited","type":"rate_limit_error"}}`, false},
		{Chat, `{"id":"x","choices":[],"error":{"message":"x"}}`, false},
		{Chat, `{"id":"x","choices":{}}`, false},
		{Chat, `{"id":"x","choices":[]`, false},
		{Chat, `not json`, false},
		{Embeddings, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5]}],"model":"e","usage":{"prompt_tokens":1,"total_tokens":1}}`, true},
		{Embeddings, storedChat, false},
		{Rerank, `{"id":"r","results":[{"index":0,"relevance_score":0.9}],"meta":{}}`, true},
		{Messages, `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn"}`, true},
		{Messages, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, false},
		{Responses, `{"id":"resp_1","object":"response","status":"completed","error":null,"output":[]}`, true},
		{Responses, `{"id":"resp_1","object":"response","status":"incomplete","error":null,"incomplete_details":{"reason":"max_output_tokens"},"output":[]}`, true},
		{Responses, `{"id":"resp_1","object":"response","status":"failed","error":{"code":"server_error","message":"x"},"output":[]}`, false},
		{Responses, `{"id":"resp_1","object":"response","status":"in_progress","error":null,"output":[]}`, false},
	} {
		err := c.Store(ctx, keyN(2), tt.api, entryOf(tt.body))
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, ErrNotAnswer) {
			t.Errorf("%s %.60s: Store = %v, want ok %v", tt.api, tt.body, err, tt.ok)
		}
	}
	if err := c.Store(ctx, keyN(3), "completions", entryOf(storedChat)); err == nil {
		t.Error("an unknown API was stored")
	}
}

// A value on the shared state that is not an entry is a miss and an
// error for the log, never a crash or a wrong answer.
func TestSharedCorrupt(t *testing.T) {
	v := state.NewLocalValues()
	s := NewShared(v)
	ctx := context.Background()
	for _, junk := range []string{"", "\x00", "\x01", "\x01\x80", "\x01\x02\x02\x02\x02\x02\x02\x02\x02\x02\x05ab"} {
		if err := v.SetValue(ctx, sharedName(keyN(1)), []byte(junk), time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.Get(ctx, keyN(1)); ok || err == nil {
			t.Errorf("%q: Get = %v, %v; want a miss with an error", junk, ok, err)
		}
	}
}

func TestEntryEncoding(t *testing.T) {
	e := Entry{Body: []byte(storedChat), Usage: Usage{1, 2, 3, 4, 5, 6, 7, -8}, Provider: "prov", Model: "mod",
		Created: time.Unix(1_750_000_000, 123456789)}
	got, err := decodeEntry(e.encode(nil))
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Body) != string(e.Body) || got.Usage != e.Usage || got.Provider != e.Provider || got.Model != e.Model || !got.Created.Equal(e.Created) {
		t.Fatalf("decoded %+v\nwant %+v", got, e)
	}
	empty, err := decodeEntry((&Entry{}).encode(nil))
	if err != nil || len(empty.Body) != 0 {
		t.Fatalf("an empty entry: %+v, %v", empty, err)
	}
}

func TestPolicy(t *testing.T) {
	for _, tt := range []struct {
		h      []string
		lookup bool
		store  bool
		status string
	}{
		{nil, true, true, StatusMiss},
		{[]string{"max-age=60"}, true, true, StatusMiss},
		{[]string{"no-cache"}, false, true, StatusBypass},
		{[]string{"No-Cache"}, false, true, StatusBypass},
		{[]string{"no-store"}, false, false, StatusBypass},
		{[]string{"max-age=0, NO-STORE"}, false, false, StatusBypass},
		{[]string{"private", " no-cache=\"x\" "}, false, true, StatusBypass},
		{[]string{"no-cacheable"}, true, true, StatusMiss},
	} {
		h := http.Header{"Cache-Control": tt.h}
		p := PolicyOf(h)
		if p.Lookup != tt.lookup || p.Store != tt.store || p.Status(false) != tt.status {
			t.Errorf("Cache-Control %q: %+v %s", tt.h, p, p.Status(false))
		}
	}
	if s := PolicyOf(nil).Status(true); s != StatusHit {
		t.Errorf("a hit's status = %s", s)
	}
}

func TestConfig(t *testing.T) {
	for _, c := range []Config{
		{TTL: -1}, {TTL: time.Millisecond}, {MaxEntries: -1}, {MaxBytes: -1}, {MaxEntrySize: -1},
		{MaxBytes: 1 << 10},
		{MaxBytes: 1 << 20, MaxEntrySize: 2 << 20},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v is valid", c)
		}
		if _, err := New(c, nil); err == nil {
			t.Errorf("New(%+v) succeeded", c)
		}
	}
	d := Config{}.WithDefaults()
	if d.TTL != DefaultTTL || d.MaxEntries != DefaultMaxEntries || d.MaxBytes != DefaultMaxBytes || d.MaxEntrySize != DefaultMaxEntrySize {
		t.Errorf("defaults = %+v", d)
	}
	if err := (Config{TTL: time.Second, MaxEntries: 1, MaxBytes: 1 << 20, MaxEntrySize: 1 << 10}).Validate(); err != nil {
		t.Error(err)
	}
}
