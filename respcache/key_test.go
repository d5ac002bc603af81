package respcache

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func mustKey(t testing.TB, r Request) Key {
	t.Helper()
	k, err := KeyOf(r)
	if err != nil {
		t.Fatalf("KeyOf(%s): %v", r.Body, err)
	}
	return k
}

func chatReq(body string) Request {
	return Request{Account: "acme", API: Chat, Model: "openai/gpt-4o", Body: []byte(body)}
}

// Requests that differ only in layout, or in members that only shape the
// transport, share a key.
func TestKeySame(t *testing.T) {
	const base = `{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"temperature":0.2}`
	tests := []struct {
		name string
		api  API
		a, b string
	}{
		{"key order", Chat, base, `{"temperature":0.2,"messages":[{"content":"Hi","role":"user"}],"model":"gpt-4o"}`},
		{"whitespace", Chat, base, "{ \"model\" : \"gpt-4o\",\n\t\"messages\": [ {\"role\":\"user\", \"content\":\"Hi\"} ] ,\r\n\"temperature\":0.2 }\n"},
		{"string escapes", Chat, base, `{"model":"gpt\u002d4o","messages":[{"role":"user","content":"\u0048i"}],"temperature":0.2}`},
		{"escaped slash", Chat, `{"model":"m","messages":[],"x":"a/b"}`, `{"model":"m","messages":[],"x":"a\/b"}`},
		{"escaped key", Chat, base, `{"\u006dodel":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"temperature":0.2}`},
		{"surrogate pair", Chat, `{"model":"m","messages":[],"x":"😀"}`, `{"model":"m","messages":[],"x":"\ud83d\ude00"}`},
		{"control escapes", Chat, `{"model":"m","messages":[],"x":"a\nb\u0001"}`, `{"model":"m","messages":[],"x":"a\u000ab\u0001"}`},
		{"stream", Chat, base, `{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"temperature":0.2,"stream":true,"stream_options":{"include_usage":true}}`},
		{"chat user and metadata", Chat, base, `{"user":"u-17","metadata":{"trace":"x"},"store":true,"safety_identifier":"s","prompt_cache_key":"p","prompt_cache_retention":"24h","model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"temperature":0.2}`},
		{"embeddings user", Embeddings, `{"model":"e","input":"x"}`, `{"input":"x","user":"u-9","model":"e"}`},
		{"messages stream and metadata", Messages, `{"model":"c","max_tokens":9,"messages":[]}`, `{"model":"c","max_tokens":9,"messages":[],"stream":true,"metadata":{"user_id":"u"}}`},
		{"responses stream", Responses, `{"model":"m","input":"x"}`, `{"model":"m","input":"x","stream":true}`},
		{"nested key order", Chat, `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{"a":1,"b":{"d":2,"c":3}}}}]}`,
			`{"tools":[{"function":{"parameters":{"b":{"c":3,"d":2},"a":1},"name":"f"},"type":"function"}],"messages":[],"model":"m"}`},
		{"empty containers", Chat, `{"model":"m","messages":[],"x":{},"y":[]}`, `{"model":"m","messages":[ ],"x":{ },"y":[  ]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustKey(t, Request{Account: "acme", API: tt.api, Model: "p/m", Body: []byte(tt.a)})
			b := mustKey(t, Request{Account: "acme", API: tt.api, Model: "p/m", Body: []byte(tt.b)})
			if a != b {
				t.Errorf("keys differ:\n%s\n%s", tt.a, tt.b)
			}
		})
	}
}

// Whatever may shape the answer, or whose answer it is, makes another key.
func TestKeyDifferent(t *testing.T) {
	const base = `{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"temperature":0.2}`
	k0 := mustKey(t, chatReq(base))
	tests := []struct {
		name string
		r    Request
	}{
		{"account", Request{Account: "other", API: Chat, Model: "openai/gpt-4o", Body: []byte(base)}},
		{"no account", Request{API: Chat, Model: "openai/gpt-4o", Body: []byte(base)}},
		{"api", Request{Account: "acme", API: Responses, Model: "openai/gpt-4o", Body: []byte(base)}},
		{"route", Request{Account: "acme", API: Chat, Model: "azure/gpt-4o", Body: []byte(base)}},
		{"message", chatReq(`{"model":"gpt-4o","messages":[{"role":"user","content":"Hi!"}],"temperature":0.2}`)},
		{"model field", chatReq(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hi"}],"temperature":0.2}`)},
		{"temperature", chatReq(`{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"temperature":0.3}`)},
		{"number as written", chatReq(`{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"temperature":0.20}`)},
		{"n", chatReq(`{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"temperature":0.2,"n":2}`)},
		{"tools", chatReq(`{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"temperature":0.2,"tools":[]}`)},
		{"service_tier", chatReq(`{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"temperature":0.2,"service_tier":"flex"}`)},
		{"array order", chatReq(`{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"},{"role":"user","content":"x"}],"temperature":0.2}`)},
		{"nested stream is not the transport's", chatReq(`{"model":"gpt-4o","messages":[{"role":"user","content":"Hi","stream":true}],"temperature":0.2}`)},
		{"string vs number", chatReq(`{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"temperature":"0.2"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if mustKey(t, tt.r) == k0 {
				t.Errorf("same key as the base request for %+v", tt.r)
			}
		})
	}
}

// Members a Response echoes are in its key; duplicates in another order
// are another request; a lone surrogate is not U+FFFD.
func TestKeyDistinctions(t *testing.T) {
	pairs := []struct {
		name string
		api  API
		a, b string
	}{
		{"responses user", Responses, `{"model":"m","input":"x"}`, `{"model":"m","input":"x","user":"u"}`},
		{"responses metadata", Responses, `{"model":"m","input":"x"}`, `{"model":"m","input":"x","metadata":{"k":"v"}}`},
		{"responses store", Responses, `{"model":"m","input":"x"}`, `{"model":"m","input":"x","store":false}`},
		{"duplicate order", Chat, `{"model":"m","messages":[],"x":1,"x":2}`, `{"model":"m","messages":[],"x":2,"x":1}`},
		{"lone surrogate", Chat, `{"model":"m","messages":[],"x":"\ud800"}`, `{"model":"m","messages":[],"x":"\ufffd"}`},
		{"escaped backslash u", Chat, `{"model":"m","messages":[],"x":"\ud800"}`, `{"model":"m","messages":[],"x":"\\ud800"}`},
		{"quote in key", Chat, `{"model":"m","messages":[],"a\"":"b"}`, `{"model":"m","messages":[],"a":"\"b"}`},
		{"embeddings input", Embeddings, `{"model":"e","input":"x"}`, `{"model":"e","input":["x"]}`},
		{"messages system", Messages, `{"model":"c","messages":[]}`, `{"model":"c","messages":[],"system":"s"}`},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			a := mustKey(t, Request{Account: "a", API: p.api, Body: []byte(p.a)})
			b := mustKey(t, Request{Account: "a", API: p.api, Body: []byte(p.b)})
			if a == b {
				t.Errorf("one key for\n%s\n%s", p.a, p.b)
			}
		})
	}
}

// The Messages API passes anthropic-version and anthropic-beta to the
// provider: they are in its key, beta flags as a set.
func TestKeyHeaders(t *testing.T) {
	body := []byte(`{"model":"c","max_tokens":9,"messages":[]}`)
	key := func(api API, h http.Header) Key {
		return mustKey(t, Request{Account: "a", API: api, Model: "anthropic/c", Body: body, Header: h})
	}
	none := key(Messages, nil)
	beta := key(Messages, http.Header{"Anthropic-Beta": {"a-1,b-2"}})
	if beta == none {
		t.Error("anthropic-beta is not in a Messages key")
	}
	if key(Messages, http.Header{"Anthropic-Beta": {"b-2", " a-1 , a-1"}}) != beta {
		t.Error("the same beta flags in another order or another header give another key")
	}
	if key(Messages, http.Header{"Anthropic-Version": {"2023-06-01"}}) == none {
		t.Error("anthropic-version is not in a Messages key")
	}
	if key(Messages, http.Header{"X-Other": {"1"}, "Cache-Control": {"max-age=5"}}) != none {
		t.Error("a header the provider never gets changes the key")
	}
	if key(Chat, http.Header{"Anthropic-Beta": {"a-1"}}) != key(Chat, nil) {
		t.Error("anthropic-beta changes a chat key, where it is not passed on")
	}
}

func TestKeyErrors(t *testing.T) {
	for _, body := range []string{
		``, `[]`, `"x"`, `{`, `{"a":}`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1}x`, `{"a":01}`, `{"a":1.}`,
		`{"a":-}`, `{"a":1e}`, `{"a":tru}`, `{"a":"x\q"}`, `{"a":"x\u12"}`, `{"a":"x` + "\n" + `"}`, `{"a":[1 2]}`,
		`{"a":"unterminated}`, strings.Repeat(`{"a":`, 1100) + `1` + strings.Repeat(`}`, 1100),
	} {
		if _, err := KeyOf(Request{API: Chat, Body: []byte(body)}); err == nil {
			t.Errorf("KeyOf(%.40q) succeeded", body)
		}
	}
	if _, err := KeyOf(Request{API: "completions", Body: []byte(`{}`)}); err == nil {
		t.Error("an unknown API has a key")
	}
	_, err := KeyOf(Request{API: Responses, Body: []byte(`{"model":"m","input":"x","background":true}`)})
	if !errors.Is(err, ErrNotCacheable) {
		t.Errorf("a background Response: %v, want ErrNotCacheable", err)
	}
	if _, err := KeyOf(Request{API: Responses, Body: []byte(`{"model":"m","input":"x","background":false}`)}); err != nil {
		t.Errorf("a foreground Response: %v", err)
	}
}

// The canonical form itself, for a few documents.
func TestCanonicalForm(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"b":1,"a":[true,false,null,-1.5e+3,"x"]}`, `{"a":[true,false,null,-1.5e+3,"x"],"b":1}`},
		{`{"a":"\u00e9\t\"\\\/"}`, `{"a":"é\t\"\\/"}`},
		{`{"a":"\u001f\u0000"}`, `{"a":"\u001f\u0000"}`},
		{`{"a":"\uDBFF\uDFFF"}`, "{\"a\":\"\U0010FFFF\"}"},
		{`{"a":"\uDC00\ud800x"}`, `{"a":"\udc00\ud800x"}`},
		{`{ "z" : { "y" : 1 , "x" : 2 } , "a" : 0 }`, `{"a":0,"z":{"x":2,"y":1}}`},
		{`{"stream":true,"model":"m"}`, `{"model":"m"}`},
		{`{"b":1,"stream":true,"a":2}`, `{"a":2,"b":1}`},
		{`{"stream":true}`, `{}`},
	}
	for _, tt := range tests {
		c := new(canon)
		c.skip = transportOnly[Chat]
		if err := c.document([]byte(tt.in)); err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if string(c.out) != tt.want {
			t.Errorf("canonical form of %s\n got %s\nwant %s", tt.in, c.out, tt.want)
		}
	}
}
