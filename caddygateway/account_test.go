package caddygateway

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers/sse"
)

// TestSettleReports checks what settling an answered request tells the
// access log and the placeholders, for a priced stream that fell back
// once and for an unpriced answer to a batch line (no key).
func TestSettleReports(t *testing.T) {
	prices, err := pricing.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	oa := &provider{name: "oa", typ: "openai", base: &ProviderBase{}}
	down := &provider{name: "down", typ: "openai", base: &ProviderBase{}}
	app := &App{logger: zap.NewNop(), prices: prices, knownModels: map[string]struct{}{}, providers: map[string]*provider{"oa": oa, "down": down}}
	ac := accountant{app: app}
	start := time.Now()

	for _, tc := range []struct {
		name      string
		key       *Key
		m         *meter
		log       string
		wantPlace map[string]string // placeholders; "" must be unset
	}{{
		name: "priced stream after a fallback",
		key:  &Key{Name: "alice-key", Owner: "alice"},
		m: &meter{start: start, firstByte: start.Add(42 * time.Millisecond), stream: true, provider: oa, model: "gpt-4o-mini",
			tried: []target{{provider: down, model: "gpt-4o"}, {provider: oa, model: "gpt-4o-mini"}},
			usage: usageInfo{Prompt: 1200, Cached: 200, Completion: 300, Known: true}},
		log: `{"msg":"handled request","modelgate_provider":"oa","modelgate_model":"gpt-4o-mini","modelgate_tokens_in":1200,` +
			`"modelgate_tokens_out":300,"modelgate_tokens_cached":200,"modelgate_fallback":["down/gpt-4o","oa/gpt-4o-mini"],` +
			`"modelgate_cost":"0.000345","modelgate_key":"alice-key","modelgate_owner":"alice","modelgate_ttft_ms":42}`,
		wantPlace: map[string]string{"http.modelgate.provider": "oa", "http.modelgate.model": "gpt-4o-mini", "http.modelgate.tokens_in": "1200", "http.modelgate.tokens_out": "300",
			"http.modelgate.tokens_cached": "200", "http.modelgate.cost": "0.000345",
			"http.modelgate.fallback": "down/gpt-4o > oa/gpt-4o-mini", "http.modelgate.ttft_ms": "42"},
	}, {
		name: "unpriced, no key",
		m: &meter{start: start, provider: oa, model: "no-such-model", tried: []target{{provider: oa, model: "no-such-model"}},
			usage: usageInfo{Prompt: 7, Completion: 3, Known: true}},
		log: `{"msg":"handled request","modelgate_provider":"oa","modelgate_model":"no-such-model","modelgate_tokens_in":7,` +
			`"modelgate_tokens_out":3,"modelgate_tokens_cached":0,"modelgate_fallback":["oa/no-such-model"],"modelgate_cost":"unpriced"}`,
		wantPlace: map[string]string{"http.modelgate.provider": "oa", "http.modelgate.model": "no-such-model", "http.modelgate.tokens_in": "7", "http.modelgate.tokens_out": "3",
			"http.modelgate.tokens_cached": "0", "http.modelgate.cost": "unpriced",
			"http.modelgate.fallback": "oa/no-such-model", "http.modelgate.ttft_ms": ""},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			repl := caddy.NewReplacer()
			extra := new(caddyhttp.ExtraLogFields)
			ctx := context.WithValue(context.Background(), caddy.ReplacerCtxKey, repl)
			ctx = context.WithValue(ctx, caddyhttp.ExtraLogFieldsCtxKey, extra)
			r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", nil)
			repl.Map(tc.m.placeholder) // as dispatcher.serve does
			if v, ok := repl.GetString("http.modelgate.tokens_in"); ok {
				t.Errorf("{http.modelgate.tokens_in} = %q before the request is settled", v)
			}
			ac.settle(r, tc.key, &call{endpoint: endpointChat}, tc.m)

			// The access log entry, as Caddy's server writes it: the
			// extra fields after its own. (ExtraLogFields keeps them
			// unexported; TestIntegrationLogs reads a real access log.)
			var out bytes.Buffer
			core := zapcore.NewCore(zapcore.NewJSONEncoder(zapcore.EncoderConfig{MessageKey: "msg"}), zapcore.AddSync(&out), zapcore.InfoLevel)
			zap.New(core).Info("handled request", zap.Field{Key: "modelgate", Type: zapcore.InlineMarshalerType, Interface: (*accessLogFields)(tc.m)})
			if got := string(bytes.TrimSpace(out.Bytes())); got != tc.log {
				t.Errorf("access log entry\n got %s\nwant %s", got, tc.log)
			}
			for k, want := range tc.wantPlace {
				got, ok := repl.GetString(k)
				if want == "" {
					if ok {
						t.Errorf("{%s} = %q, want unset", k, got)
					}
					continue
				}
				if got != want {
					t.Errorf("{%s} = %q (set %v), want %q", k, got, ok, want)
				}
			}
		})
	}
}

// TestSettleAccessLogFields checks that settling adds the gateway's
// fields to the access log entry of a request a server may log, and skips
// them where the server keeps no access log (they would cost every
// request an allocation or two for nothing). TestIntegrationLogs reads
// them in a real access log.
func TestSettleAccessLogFields(t *testing.T) {
	prices, err := pricing.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	oa := &provider{name: "oa", typ: "openai", base: &ProviderBase{}}
	ac := accountant{app: &App{logger: zap.NewNop(), prices: prices, knownModels: map[string]struct{}{}, providers: map[string]*provider{"oa": oa}}}
	for _, tc := range []struct {
		name   string
		server *caddyhttp.Server // nil: none in the context
		want   bool
	}{
		{"server with access logs", &caddyhttp.Server{Logs: &caddyhttp.ServerLogConfig{}}, true},
		{"server without access logs", &caddyhttp.Server{}, false},
		{"no server in the context", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := new(caddyhttp.ExtraLogFields)
			ctx := context.WithValue(context.Background(), caddy.ReplacerCtxKey, caddy.NewReplacer())
			ctx = context.WithValue(ctx, caddyhttp.ExtraLogFieldsCtxKey, extra)
			if tc.server != nil {
				ctx = context.WithValue(ctx, caddyhttp.ServerCtxKey, tc.server)
			}
			r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", nil)
			m := &meter{start: time.Now(), provider: oa, model: "gpt-4o-mini", usage: usageInfo{Prompt: 10, Completion: 5, Known: true}}
			ac.settle(r, &Key{Name: "k"}, &call{endpoint: endpointChat}, m)
			// ExtraLogFields keeps its fields unexported.
			fields := reflect.ValueOf(extra).Elem().FieldByName("fields")
			if fields.Kind() != reflect.Slice {
				t.Fatalf("caddyhttp.ExtraLogFields has no fields slice any more: %v", fields.Kind())
			}
			if got := fields.Len() == 1; got != tc.want {
				t.Errorf("access log fields set: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRequestPlaceholders sends requests through the gateway and reads the
// placeholders a later handler (or the access log's log_append) sees.
func TestRequestPlaceholders(t *testing.T) {
	g := newBenchGateway(t)
	for _, tc := range []struct {
		name string
		body []byte
		want map[string]string // "": unset; "*": set to anything
	}{
		{"answered", benchChatBody("oa/gpt-4o-mini", 0, false), map[string]string{
			"http.modelgate.key": "bench", "http.auth.user.id": "bench",
			"http.modelgate.provider": "oa", "http.modelgate.model": "gpt-4o-mini",
			"http.modelgate.tokens_in": "14", "http.modelgate.tokens_out": "10", "http.modelgate.tokens_cached": "0",
			"http.modelgate.cost": "0.0000081", "http.modelgate.fallback": "oa/gpt-4o-mini", "http.modelgate.ttft_ms": ""}},
		{"streamed", benchChatBody("claude/claude-sonnet-4-5", 0, true), map[string]string{
			"http.modelgate.provider": "claude", "http.modelgate.model": "claude-sonnet-4-5",
			"http.modelgate.fallback": "claude/claude-sonnet-4-5", "http.modelgate.ttft_ms": "*"}},
		{"refused by the provider's translator", []byte(`{"model":"claude/claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}],"n":3}`), map[string]string{
			"http.modelgate.provider": "claude", "http.modelgate.model": "claude-sonnet-4-5",
			"http.modelgate.tokens_in": "", "http.modelgate.cost": "", "http.modelgate.fallback": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &sink{header: make(http.Header), keep: true}
			r := g.request(w, "/v1/chat/completions", tc.body, "Authorization", "Bearer "+benchStaticKey)
			if err := g.serveModelgate(w, r); err != nil {
				t.Fatal(err)
			}
			repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
			for k, want := range tc.want {
				got, ok := repl.GetString(k)
				switch {
				case want == "" && ok:
					t.Errorf("{%s} = %q, want unset (status %d: %.200s)", k, got, w.status, w.body.Bytes())
				case want == "*" && !ok:
					t.Errorf("{%s} unset (status %d: %.200s)", k, w.status, w.body.Bytes())
				case want != "" && want != "*" && got != want:
					t.Errorf("{%s} = %q (set %v), want %q (status %d: %.200s)", k, got, ok, want, w.status, w.body.Bytes())
				}
			}
		})
	}
}

// TestChatUsage reads usage from chat answers and stream chunks.
func TestChatUsage(t *testing.T) {
	for _, tc := range []struct {
		name, usage string
		want        usageInfo
	}{
		{"every count", `{"prompt_tokens":1200,"completion_tokens":300,"total_tokens":1500,"prompt_tokens_details":{"cached_tokens":200,"audio_tokens":0,"cache_write_tokens":100},"completion_tokens_details":{"reasoning_tokens":120,"audio_tokens":0}}`,
			usageInfo{Prompt: 1200, Completion: 300, Cached: 200, CacheWrite: 100, Reasoning: 120, Known: true}},
		{"one-hour cache writes", `{"prompt_tokens":6100,"completion_tokens":100,"prompt_tokens_details":{"cached_tokens":2000,"cache_write_tokens":3000,"cache_write_1h_tokens":1000}}`,
			usageInfo{Prompt: 6100, Completion: 100, Cached: 2000, CacheWrite: 3000, CacheWrite1h: 1000, Known: true}},
		{"no details", `{"prompt_tokens":14,"completion_tokens":10,"total_tokens":24}`, usageInfo{Prompt: 14, Completion: 10, Known: true}},
		{"details null", `{"prompt_tokens":14,"completion_tokens":10,"prompt_tokens_details":null,"completion_tokens_details":null}`, usageInfo{Prompt: 14, Completion: 10, Known: true}},
		{"a key given twice: the first counts", `{"prompt_tokens":5,"prompt_tokens":7,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":2},"prompt_tokens_details":{"cached_tokens":3}}`,
			usageInfo{Prompt: 5, Completion: 1, Cached: 2, Known: true}},
		{"empty", `{}`, usageInfo{Known: true}},
		{"null", `null`, usageInfo{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got usageInfo
			chatUsage.answer([]byte(`{"id":"chatcmpl-1","choices":[],"usage":`+tc.usage+`}`), &got)
			if got != tc.want {
				t.Errorf("answer: %+v, want %+v", got, tc.want)
			}
			got = usageInfo{}
			chatUsage.event([]byte(`data: {"id":"chatcmpl-1","choices":[],"usage":`+tc.usage+`}`), &got)
			if got != tc.want {
				t.Errorf("event: %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzChatUsage: on any valid JSON, readChatUsage reads what gjson's walk
// of the usage object and lookups by path read (readChatUsageReference);
// on anything, it does not panic.
func FuzzChatUsage(f *testing.F) {
	fuzzUsage(f, readChatUsage, readChatUsageReference, usageInfo{},
		`{"prompt_tokens":1200,"completion_tokens":300,"prompt_tokens_details":{"cached_tokens":200,"cache_write_tokens":100,"cache_write_1h_tokens":40},"completion_tokens_details":{"reasoning_tokens":120}}`,
		`{"prompt_tokens":"14","completion_tokens":1.5e1,"prompt_tokens_details":null,"completion_tokens_details":[1],"prompt_tokens":7}`,
		`{"pr\u006fmpt_tokens":true,"completion_tokens":-3,"prompt_tokens_details":{"cached_tokens":{"x":1}}}`)
}

// fuzzUsage fuzzes a usage reader: on any valid JSON, over the counts an
// earlier event left, it reads what reference reads; on anything, it does
// not panic.
func fuzzUsage(f *testing.F, read, reference func(gjson.Result, *usageInfo), earlier usageInfo, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, usage string) {
		got := earlier
		read(gjson.Parse(usage), &got)
		if !gjson.Valid(usage) {
			return
		}
		want := earlier
		reference(gjson.Parse(usage), &want)
		if got != want {
			t.Fatalf("%s: %+v, want %+v", usage, got, want)
		}
	})
}

// readChatUsageReference is readChatUsage done with gjson's walk and
// lookups.
func readChatUsageReference(v gjson.Result, u *usageInfo) {
	if !v.IsObject() {
		return
	}
	first := func(k string) gjson.Result { return v.Get(gjson.Escape(k)) }
	u.Known = true
	u.Prompt, u.Completion = first("prompt_tokens").Int(), first("completion_tokens").Int()
	if d := first("prompt_tokens_details"); d.IsObject() {
		u.Cached, u.CacheWrite = d.Get("cached_tokens").Int(), d.Get("cache_write_tokens").Int()
		u.CacheWrite1h = d.Get("cache_write_1h_tokens").Int()
	}
	if d := first("completion_tokens_details"); d.IsObject() {
		u.Reasoning = d.Get("reasoning_tokens").Int()
	}
}

// TestCacheWrite1hPriced reads Claude's one-hour cache writes from a
// chat answer and from a Messages stream (message_start gives them,
// message_delta leaves them as they were) and prices them at the model's
// cache_write_1h rate: 1,000 uncached, 2,000 read and 3,000 written
// prompt tokens (1,000 for an hour) and 100 output tokens of Claude
// Sonnet 4.5 cost $0.0186, not the $0.01635 of five-minute writes.
func TestCacheWrite1hPriced(t *testing.T) {
	var chat usageInfo
	chatUsage.answer([]byte(`{"id":"c","choices":[],"usage":{"prompt_tokens":6000,"completion_tokens":100,"prompt_tokens_details":{"cached_tokens":2000,"cache_write_tokens":3000,"cache_write_1h_tokens":1000}}}`), &chat)
	var msgs usageInfo
	messagesUsage.event([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1000,\"cache_read_input_tokens\":2000,\"cache_creation_input_tokens\":3000,\"cache_creation\":{\"ephemeral_5m_input_tokens\":2000,\"ephemeral_1h_input_tokens\":1000},\"output_tokens\":1}}}"), &msgs)
	messagesUsage.event([]byte("event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":1000,\"cache_read_input_tokens\":2000,\"cache_creation_input_tokens\":3000,\"output_tokens\":100}}"), &msgs)
	p := pricing.Default()
	for name, u := range map[string]usageInfo{"chat": chat, "messages": msgs} {
		if u.Prompt != 6000 || u.CacheWrite != 3000 || u.CacheWrite1h != 1000 || u.Completion != 100 {
			t.Errorf("%s: usage %+v", name, u)
		}
		if got, ok := p.Cost("anthropic", "claude-sonnet-4-5", u.pricing()); !ok || got != 18600*pricing.Microdollar {
			t.Errorf("%s: cost %s, %v; want 0.0186", name, got, ok)
		}
	}
}

// FuzzMessagesUsage: on any valid JSON, readMessagesUsage reads what
// lookups by path read (readMessagesUsageReference), over the counts an
// earlier event left; on anything, it does not panic.
func FuzzMessagesUsage(f *testing.F) {
	fuzzUsage(f, readMessagesUsage, readMessagesUsageReference, usageInfo{Prompt: 1, Cached: 2, CacheWrite: 3, CacheWrite1h: 1, Completion: 4, Known: true},
		`{"input_tokens":14,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens":10,"cache_creation":{"ephemeral_5m_input_tokens":2}}`,
		`{"input_tokens":14,"cache_creation_input_tokens":5,"output_tokens":10,"cache_creation":{"ephemeral_5m_input_tokens":2,"ephemeral_1h_input_tokens":3}}`,
		`{"input_tokens":14,"cache_creation":null,"cache_creation":{"ephemeral_1h_input_tokens":3}}`,
		`{"output_tokens":"7","input_tokens":null,"output_tokens":1}`)
}

// readMessagesUsageReference is readMessagesUsage done with gjson's
// lookups.
func readMessagesUsageReference(v gjson.Result, u *usageInfo) {
	if !v.IsObject() {
		return
	}
	u.Known = true
	if x := v.Get("input_tokens"); x.Exists() {
		read, write := v.Get("cache_read_input_tokens"), v.Get("cache_creation_input_tokens")
		if read.Exists() {
			u.Cached = read.Int()
		}
		if write.Exists() {
			u.CacheWrite = write.Int()
		}
		if c := v.Get("cache_creation"); c.Exists() {
			u.CacheWrite1h = c.Get("ephemeral_1h_input_tokens").Int()
		}
		u.Prompt = x.Int() + u.Cached + u.CacheWrite
	}
	if x := v.Get("output_tokens"); x.Exists() {
		u.Completion = x.Int()
	}
}

// TestTapStreamStrip reads a chat stream's usage on its way to the client
// and, when the gateway asked for the usage and the client did not, takes
// out the usage chunk and the "usage":null fields, whatever the events'
// line ends and however the stream is cut into segments.
func TestTapStreamStrip(t *testing.T) {
	chunk := func(content string) string {
		return `data: {"id":"c","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":null}],"usage":null}`
	}
	usage := `data: {"id":"c","choices":[],"usage":{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17}}`
	events := []string{chunk("a"), ": keep-alive", chunk("b"), `data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`, usage, "data: [DONE]"}
	stripped := []string{`data: {"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}`, ": keep-alive",
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":"b"},"finish_reason":null}]}`,
		`data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, "data: [DONE]"}
	for _, sep := range []string{"\n\n", "\r\n\r\n"} {
		for _, strip := range []bool{false, true} {
			for per := 1; per <= len(events); per++ {
				if sep != "\n\n" && per < len(events) {
					// A segment without usage in it passes as it is,
					// line ends and all: CRLF events are checked in one
					// segment.
					continue
				}
				m := &meter{}
				tap := &tapStream{m: m, parse: chatUsage.event, strip: strip}
				var got []byte
				// A segment of per events at a time, as a translator
				// writes several at once; the tap sees them after what
				// the client already has.
				for i := 0; i < len(events); i += per {
					start := len(got)
					for _, ev := range events[i:min(i+per, len(events))] {
						got = append(got, ev+sep...)
					}
					got = tap.read(got, start)
				}
				want := strings.Join(events, sep) + sep
				if strip {
					want = strings.Join(stripped, "\n\n") + "\n\n"
				}
				if string(got) != want {
					t.Errorf("strip %v, %d events a segment, %q:\n got %q\nwant %q", strip, per, sep, got, want)
				}
				if m.usage != (usageInfo{Prompt: 14, Completion: 3, Known: true}) {
					t.Errorf("strip %v, %d a segment: usage %+v", strip, per, m.usage)
				}
			}
		}
	}
}

// TestTapStreamRead is one segment on its way to the client, as the tap
// gets it from the translator (or the pass-through), read for usage and,
// when stripping, without the "usage":null fields and the usage chunk.
func TestTapStreamRead(t *testing.T) {
	const (
		head  = `data: {"id":"c","object":"chat.completion.chunk","choices":[`
		delta = `{"index":0,"delta":{"content":"a"},"finish_reason":null}]`
		usage = `{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17}`
	)
	read := usageInfo{Prompt: 14, Completion: 3, Known: true}
	for _, tc := range []struct {
		name, seg, stripped string
		usage               usageInfo
	}{
		{name: "no usage", seg: head + delta + "}\n\n", stripped: head + delta + "}\n\n"},
		{name: "a comment and [DONE]", seg: ": keep-alive\n\ndata: [DONE]\n\n", stripped: ": keep-alive\n\ndata: [DONE]\n\n"},
		{name: "usage null", seg: head + delta + `,"usage":null}` + "\n\n", stripped: head + delta + "}\n\n"},
		{name: "two chunks with usage null",
			seg:      head + delta + `,"usage":null}` + "\n\n" + head + delta + `,"usage":null}` + "\n\n",
			stripped: head + delta + "}\n\n" + head + delta + "}\n\n"},
		// A JSON string cannot hold an unescaped quote: "usage":null in
		// content is \"usage\":null, and stays.
		{name: `"usage":null in content`,
			seg:      head + `{"index":0,"delta":{"content":"x,\"usage\":null \"usage\":{\"prompt_tokens\":9}"},"finish_reason":null}],"usage":null}` + "\n\n",
			stripped: head + `{"index":0,"delta":{"content":"x,\"usage\":null \"usage\":{\"prompt_tokens\":9}"},"finish_reason":null}]}` + "\n\n"},
		{name: `content "usage"`,
			seg:      head + `{"index":0,"delta":{"content":"usage"},"finish_reason":null}],"usage":null}` + "\n\n",
			stripped: head + `{"index":0,"delta":{"content":"usage"},"finish_reason":null}]}` + "\n\n"},
		{name: "usage chunk", seg: head + `],"usage":` + usage + "}\n\n", stripped: "", usage: read},
		{name: "finish, usage chunk and [DONE], as a translator writes them at the end",
			seg:      head + `{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n" + head + `],"usage":` + usage + "}\n\n" + "data: [DONE]\n\n",
			stripped: head + `{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" + "data: [DONE]\n\n", usage: read},
		{name: "usage on a chunk with choices is kept",
			seg:      head + delta + `,"usage":` + usage + "}\n\n",
			stripped: head + delta + `,"usage":` + usage + "}\n\n", usage: read},
		{name: "usage first in the chunk",
			seg:      `data: {"usage":null,"id":"c","choices":[` + delta + "}\n\n",
			stripped: `data: {"usage":null,"id":"c","choices":[` + delta + "}\n\n"},
	} {
		for _, strip := range []bool{false, true} {
			m := &meter{}
			tap := &tapStream{m: m, parse: chatUsage.event, strip: strip}
			prefix := "data: earlier\n\n" // what the client already has
			got := tap.read([]byte(prefix+tc.seg), len(prefix))
			want := prefix + tc.seg
			if strip {
				want = prefix + tc.stripped
			}
			if string(got) != want {
				t.Errorf("%s, strip %v:\n got %q\nwant %q", tc.name, strip, got, want)
			}
			if m.usage != tc.usage {
				t.Errorf("%s, strip %v: usage %+v, want %+v", tc.name, strip, m.usage, tc.usage)
			}
			if m.firstByte.IsZero() {
				t.Errorf("%s: first byte not timed", tc.name)
			}
		}
	}
}

// FuzzTapStreamRead checks the tap's one scan against its event-by-event
// read, for segments of events as translators and the pass-through write
// them (each ending in a blank line "\n\n"): the same bytes to the client,
// the same usage read.
func FuzzTapStreamRead(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"delta":{"content":"a"}}],"usage":null}`,
		`{"choices":[],"usage":{"prompt_tokens":14,"completion_tokens":3}}`,
		`{"choices":[{"delta":{"content":"\"usage\":null"}}],"usage":null}`,
		`{"usage":null,"choices":[],"usage":null}`,
		`{"choices":[{"delta":{"content":"usage"}}],"usage":null,"x":{"usage":null}}`,
		`[DONE]`,
	} {
		f.Add(s, s, true)
	}
	// Two fields in the second event: only its first goes.
	f.Add(`{"choices":[],"usage":null}`, `{"choices":[],"usage":null,"x":{},"usage":null}`, true)
	f.Fuzz(func(t *testing.T, a, b string, strip bool) {
		var seg []byte
		for _, data := range []string{a, b} {
			// Any data, as one event: no blank line inside it.
			data = strings.NewReplacer("\r", " ", "\n", " ").Replace(data)
			seg = append(append(append(seg, "data: "...), data...), "\n\n"...)
		}
		fast, slow := &meter{}, &meter{}
		got := (&tapStream{m: fast, parse: chatUsage.event, strip: strip}).read(bytes.Clone(seg), 0)
		want := (&tapStream{m: slow, parse: chatUsage.event, strip: strip}).readEvents(bytes.Clone(seg), 0)
		if !bytes.Equal(got, want) || fast.usage != slow.usage {
			t.Errorf("segment %q, strip %v:\n got %q %+v\nwant %q %+v", seg, strip, got, fast.usage, want, slow.usage)
		}
	})
}

// FuzzNoteEnd checks the tap's search of a segment's events for one that
// ends the stream (cut at blank lines, stray line ends trimmed) against
// cutting the segment event by event: for each API, a segment of events
// with names, data and comments ends the stream when one of its events
// does.
func FuzzNoteEnd(f *testing.F) {
	f.Add("", "[DONE]", ": keep-alive", "", true)
	f.Add("message_stop", `{"type":"message_stop"}`, "", "", false)
	f.Add("", `{"error":{"message":"x"}}`, "", `{"type":"response.completed"}`, true)
	f.Add("", `{"choices":[{"finish_reason": "stop"}]}`, "", `{"choices":[{"finish_reason":null}]}`, true)
	f.Fuzz(func(t *testing.T, name, data, comment, data2 string, before bool) {
		clean := strings.NewReplacer("\r", " ", "\n", " ")
		ev := "data: " + clean.Replace(data)
		if name != "" {
			ev = "event: " + clean.Replace(name) + "\n" + ev
		}
		var seg string
		if before {
			seg += "data: " + clean.Replace(data2) + "\n\n"
		}
		seg += ev + "\n\n"
		if comment != "" {
			seg += ":" + clean.Replace(comment) + "\n\n"
		}
		for _, a := range []*api{openAIAPI, messagesAPI, responsesAPI} {
			// What cutting the segment event by event says.
			var want bool
			for rest := []byte(seg); ; {
				ev, r, ok := sse.Cut(rest)
				if !ok {
					break
				}
				want = want || len(ev) > 0 && a.ends(ev)
				rest = r
			}
			tap := &tapStream{ends: a.ends}
			tap.noteEnd([]byte(seg))
			if tap.ended != want {
				t.Errorf("segment %q: ended %v, want %v", seg, tap.ended, want)
			}
		}
	})
}

// TestReplacerEntries holds modelgate to setting nothing in a request's
// replacer map beyond what reverse_proxy sets for the provider's answer
// (about sixteen entries and one per response header, rate-limit headers
// aside, see authTransport.send): its placeholders
// are answered by functions instead. Each entry costs an insert, and two
// more took the map of an OpenAI answer past a growth (2.3 KB per request).
func TestReplacerEntries(t *testing.T) {
	g := newBenchGateway(t)
	// serve sends a chat request and returns its replacer's entries and
	// the replacer.
	serve := func(serve func(http.ResponseWriter, *http.Request) error, model string) (map[string]bool, *caddy.Replacer) {
		t.Helper()
		w := &sink{header: make(http.Header), keep: true}
		r := g.request(w, "/v1/chat/completions", benchChatBody(model, 0, false), "Authorization", "Bearer "+benchStaticKey)
		if err := serve(w, r); err != nil || w.status != http.StatusOK {
			t.Fatalf("status %d, error %v: %s", w.status, err, w.body.Bytes())
		}
		repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		if v, _ := repl.GetString("http.reverse_proxy.header.X-Request-Id"); v == "" {
			t.Fatal("reverse_proxy set no placeholder for the answer's X-Request-Id")
		}
		// caddy.Replacer keeps its entries unexported; reading the map's
		// keys through reflection does not touch it.
		m := reflect.ValueOf(repl).Elem().FieldByName("static")
		if !m.IsValid() || m.Kind() != reflect.Map {
			t.Fatal("caddy.Replacer has no map named static any more: this test needs updating")
		}
		keys := map[string]bool{}
		for _, k := range m.MapKeys() {
			keys[k.String()] = true
		}
		return keys, repl
	}
	plain, _ := serve(g.servePlain, "gpt-4o-mini")
	got, repl := serve(g.serveModelgate, "oa/gpt-4o-mini")
	for k := range got {
		if !plain[k] {
			t.Errorf("modelgate set %q in the replacer map, which plain reverse_proxy does not", k)
		}
	}
	// All of plain's but the provider's rate-limit headers, which the
	// gateway's transport takes out of a successful answer.
	for k := range plain {
		if !got[k] && !strings.HasPrefix(k, "http.reverse_proxy.header.X-Ratelimit-") {
			t.Errorf("modelgate's request has no %q in the replacer map", k)
		}
	}
	// The placeholders are still there for whoever reads them.
	if v, _ := repl.GetString("http.auth.user.id"); v != "bench" {
		t.Errorf("{http.auth.user.id} = %q, want bench", v)
	}
}

// TestKeyPlaceholderPrecedence: modelgate_auth answers its placeholders
// from the key, so a value another handler gives one, before or after it,
// wins, and deleting that value brings back the key's (README, Directive
// modelgate_auth).
func TestKeyPlaceholderPrecedence(t *testing.T) {
	g := newBenchGateway(t)
	w := &sink{header: make(http.Header), keep: true}
	r := g.request(w, "/v1/chat/completions", benchChatBody("oa/gpt-4o-mini", 0, false), "Authorization", "Bearer "+benchStaticKey)
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	repl.Set("http.auth.user.id", "set-before") // as a handler before modelgate_auth would
	if err := g.serveModelgate(w, r); err != nil || w.status != http.StatusOK {
		t.Fatalf("status %d, error %v", w.status, err)
	}
	if v, _ := repl.GetString("http.auth.user.id"); v != "set-before" {
		t.Errorf("{http.auth.user.id} = %q, want the value set before modelgate_auth", v)
	}
	repl.Set("http.modelgate.key", "set-after")
	if v, _ := repl.GetString("http.modelgate.key"); v != "set-after" {
		t.Errorf("{http.modelgate.key} = %q, want the value set after modelgate_auth", v)
	}
	repl.Delete("http.auth.user.id")
	repl.Delete("http.modelgate.key")
	for k, want := range map[string]string{"http.auth.user.id": "bench", "http.modelgate.key": "bench"} {
		if v, _ := repl.GetString(k); v != want {
			t.Errorf("{%s} = %q after the other value was deleted, want the key's %q", k, v, want)
		}
	}
}
