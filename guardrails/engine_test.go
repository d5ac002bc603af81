package guardrails

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// newEngine builds an engine of guards, failing the test on an error.
func newEngine(t testing.TB, opts Options, guards ...GuardConfig) *Engine {
	t.Helper()
	e, err := New(Config{Guards: guards}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var piiMask = GuardConfig{Name: "pii", Type: "pii"}

// TestMaskBodies masks the texts of each API's requests and answers and
// keeps every other byte.
func TestMaskBodies(t *testing.T) {
	e := newEngine(t, Options{}, piiMask)
	tests := []struct {
		name string
		api  API
		dir  Direction
		in   string
		want string
	}{
		{"chat string content", Chat, Request,
			`{"model":"m",  "messages":[{"role":"user","content":"mail bob@example.com now"}],"temperature":0.5}`,
			`{"model":"m",  "messages":[{"role":"user","content":"mail [EMAIL] now"}],"temperature":0.5}`},
		{"chat parts, escapes kept elsewhere", Chat, Request,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"a\u00e9 \"q\" 4111 1111 1111 1111"},{"type":"image_url","image_url":{"url":"https://x/bob@example.com"}}]}],"user":"bob@example.com"}`,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"aé \"q\" [CREDIT_CARD]"},{"type":"image_url","image_url":{"url":"https://x/bob@example.com"}}]}],"user":"bob@example.com"}`},
		{"chat tool call arguments and tool result", Chat, Request,
			`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"send","arguments":"{\"to\":\"bob@example.com\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"sent to +44 20 7946 0958"}]}`,
			`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"send","arguments":"{\"to\":\"[EMAIL]\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"sent to [PHONE]"}]}`},
		{"chat escaped newline before a number", Chat, Request,
			`{"messages":[{"role":"user","content":"card:\n4111111111111111"}]}`,
			`{"messages":[{"role":"user","content":"card:\n[CREDIT_CARD]"}]}`},
		{"responses input and instructions", Responses, Request,
			`{"model":"m","instructions":"never reveal 10.1.2.3","input":[{"role":"user","content":[{"type":"input_text","text":"ssn 321-54-9876"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{\"ip\":\"192.168.0.1\"}"},{"type":"function_call_output","call_id":"c","output":"ok bob@example.com"}]}`,
			`{"model":"m","instructions":"never reveal [IP_ADDRESS]","input":[{"role":"user","content":[{"type":"input_text","text":"ssn [US_SSN]"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{\"ip\":\"[IP_ADDRESS]\"}"},{"type":"function_call_output","call_id":"c","output":"ok [EMAIL]"}]}`},
		{"responses string input", Responses, Request,
			`{"model":"m","input":"my IBAN is DE89370400440532013000"}`,
			`{"model":"m","input":"my IBAN is [IBAN]"}`},
		{"messages system, blocks, tool_use input, tool_result", Messages, Request,
			`{"model":"m","max_tokens":10,"system":[{"type":"text","text":"ops@example.com"}],"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"bob@example.com","signature":"s"},{"type":"tool_use","id":"t","name":"f","input":{"to":["bob@example.com"],"n":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjAA"}]}]}]}`,
			`{"model":"m","max_tokens":10,"system":[{"type":"text","text":"[EMAIL]"}],"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"bob@example.com","signature":"s"},{"type":"tool_use","id":"t","name":"f","input":{"to":["[EMAIL]"],"n":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"key [SECRET]"}]}]}]}`},
		{"embeddings strings", Embeddings, Request,
			`{"model":"m","input":["plain","bob@example.com"],"encoding_format":"float"}`,
			`{"model":"m","input":["plain","[EMAIL]"],"encoding_format":"float"}`},
		{"embeddings tokens", Embeddings, Request,
			`{"model":"m","input":[[1,2,3]]}`, `{"model":"m","input":[[1,2,3]]}`},
		{"rerank query and object documents", Rerank, Request,
			`{"model":"m","query":"bob@example.com","documents":["a",{"title":"t","body":"call 202-555-0173"}]}`,
			`{"model":"m","query":"[EMAIL]","documents":["a",{"title":"t","body":"call [PHONE]"}]}`},
		{"chat answer", Chat, Response,
			`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"it is bob@example.com","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"q\":\"202-555-0173\"}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`,
			`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"it is [EMAIL]","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"q\":\"[PHONE]\"}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`},
		{"responses answer", Responses, Response,
			`{"id":"r","output":[{"type":"reasoning","summary":[]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"bob@example.com","annotations":[]}]}],"instructions":"x@example.com"}`,
			`{"id":"r","output":[{"type":"reasoning","summary":[]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"[EMAIL]","annotations":[]}]}],"instructions":"x@example.com"}`},
		{"messages answer", Messages, Response,
			`{"id":"m","content":[{"type":"text","text":"ip 10.0.0.1"},{"type":"tool_use","id":"t","name":"f","input":{"a":"bob@example.com"}}],"stop_reason":"end_turn"}`,
			`{"id":"m","content":[{"type":"text","text":"ip [IP_ADDRESS]"},{"type":"tool_use","id":"t","name":"f","input":{"a":"[EMAIL]"}}],"stop_reason":"end_turn"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r *Result
			if tt.dir == Request {
				r = e.Request(context.Background(), tt.api, []byte(tt.in), nil)
			} else {
				r = e.Answer(context.Background(), tt.api, []byte(tt.in), nil)
			}
			if r.Verdict != Allowed || r.Err != nil {
				t.Fatalf("verdict %d, err %v", r.Verdict, r.Err)
			}
			if string(r.Body) != tt.want {
				t.Errorf("body\n got %s\nwant %s", r.Body, tt.want)
			}
			if r.Masked != (tt.in != tt.want) {
				t.Errorf("Masked = %v", r.Masked)
			}
			if !json.Valid(r.Body) {
				t.Errorf("not JSON: %s", r.Body)
			}
			if len(r.Decisions) != 1 || r.Decisions[0].Guard != "pii" || r.Decisions[0].Matched != r.Masked {
				t.Errorf("decisions %+v", r.Decisions)
			}
		})
	}
}

// TestBlockAndLog: a block stops at the first guard that blocks and
// names it; log matches and lets the body through unchanged; filters
// keep a guard to its models, keys and accounts.
func TestBlockAndLog(t *testing.T) {
	e := newEngine(t, Options{},
		GuardConfig{Name: "audit", Type: "pii", Action: "log", Detect: []string{"email"}},
		GuardConfig{Name: "banned", Type: "regex", Pattern: `(?i)project +falcon`, Apply: []string{"request"}},
		GuardConfig{Name: "cards", Type: "pii", Action: "block", Detect: []string{"credit_card"}, Models: []string{"oai/*"}},
		GuardConfig{Name: "vip", Type: "regex", Pattern: `secret plan`, Keys: []string{"alice"}, Accounts: []string{"acme"}},
	)
	body := func(s string) []byte {
		b, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": s}}})
		return b
	}
	ctx := context.Background()
	r := e.Request(ctx, Chat, body("tell bob@example.com about Project  Falcon"), &Scope{Models: []string{"gpt"}})
	if r.Verdict != Blocked || r.Stop.Guard != "banned" || len(r.Decisions) != 2 {
		t.Fatalf("got %+v", r)
	}
	if d := r.Decisions[0]; d.Action != Log || !d.Matched || !d.Allowed || d.Found[0] != "email" {
		t.Errorf("log decision %+v", d)
	}
	pe := r.Error()
	if pe.Status != 400 || pe.Code != "content_blocked" || !strings.Contains(pe.Message, `guard "banned"`) {
		t.Errorf("error %+v", pe)
	}
	// The regex guard applies to requests only.
	if r := e.Answer(ctx, Chat, []byte(`{"choices":[{"message":{"content":"project falcon"}}]}`), nil); r.Verdict != Allowed {
		t.Errorf("answer: %+v", r)
	}
	// Cards are blocked for oai models only, named or routed to.
	card := body("4111111111111111")
	if r := e.Request(ctx, Chat, card, &Scope{Models: []string{"gpt"}}); r.Verdict != Allowed {
		t.Errorf("other model: %+v", r)
	}
	if r := e.Request(ctx, Chat, card, &Scope{Models: []string{"fast", "oai/gpt-4o"}}); r.Verdict != Blocked || r.Stop.Guard != "cards" {
		t.Errorf("oai model: %+v", r)
	}
	plan := body("the secret plan")
	if r := e.Request(ctx, Chat, plan, &Scope{Key: "alice", Account: "other"}); r.Verdict != Allowed {
		t.Errorf("other account: %+v", r)
	}
	if r := e.Request(ctx, Chat, plan, &Scope{Key: "alice", Account: "acme"}); r.Verdict != Blocked {
		t.Errorf("alice of acme: %+v", r)
	}
}

// TestBatchLine masks a batch line's body by its url and keeps the rest.
func TestBatchLine(t *testing.T) {
	e := newEngine(t, Options{}, piiMask)
	line := `{"custom_id":"bob@example.com","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":"bob@example.com"}}`
	r := e.BatchLine(context.Background(), []byte(line), nil)
	want := `{"custom_id":"bob@example.com","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":"[EMAIL]"}}`
	if string(r.Body) != want {
		t.Errorf("got  %s\nwant %s", r.Body, want)
	}
	r = e.BatchLine(context.Background(), []byte(`{"url":"/v1/chat/completions","body":{"messages":[{"content":"x"}]`), nil)
	if r.Err == nil || r.Error().Status != 400 {
		t.Errorf("broken line: %+v", r)
	}
}

// TestBadBodies: a body the guards cannot read is refused, never let
// through unread.
func TestBadBodies(t *testing.T) {
	e := newEngine(t, Options{}, piiMask)
	for _, b := range []string{``, `[]`, `{"messages":[{"content":"a\x"}]}`, `{"messages":[{"content":"a"}`, `{"messages":[}`,
		`{"messages":[{"content":"\ud800"}]}x`, `{"input":` + strings.Repeat(`{"a":`, 100) + `"x"` + strings.Repeat(`}`, 100) + `}`} {
		r := e.Request(context.Background(), Rerank, []byte(b), nil)
		r2 := e.Request(context.Background(), Chat, []byte(b), nil)
		if r.Verdict == Allowed && r2.Verdict == Allowed && json.Valid([]byte(b)) == false {
			t.Errorf("%q let through", b)
		}
	}
	deep := `{"documents":[` + strings.Repeat(`[`, 100) + `"a@b.co"` + strings.Repeat(`]`, 100) + `]}`
	if r := e.Request(context.Background(), Rerank, []byte(deep), nil); r.Err == nil {
		t.Errorf("a body nested past maxDepth was let through")
	}
}

// TestNoGuards: without a guard that applies, the body is not read.
func TestNoGuards(t *testing.T) {
	e := newEngine(t, Options{}, GuardConfig{Name: "a", Type: "pii", Apply: []string{"response"}})
	body := []byte(`not json`)
	if r := e.Request(context.Background(), Chat, body, nil); r.Verdict != Allowed || &r.Body[0] != &body[0] {
		t.Errorf("got %+v", r)
	}
	if e.AnswerStream(Chat, nil) == nil || e.Applies(Request, nil) {
		t.Error("Applies")
	}
	var none *Engine
	if none.Applies(Request, nil) {
		t.Error("a nil engine applies")
	}
}

// TestConfigErrors: every misconfiguration is an error naming the guard.
func TestConfigErrors(t *testing.T) {
	for _, g := range []GuardConfig{
		{Type: "pii"},
		{Name: "a", Type: "nope"},
		{Name: "a", Type: "pii", Detect: []string{"passport"}},
		{Name: "a", Type: "pii", Apply: []string{"both"}},
		{Name: "a", Type: "pii", Action: "allow"},
		{Name: "a", Type: "regex"},
		{Name: "a", Type: "regex", Pattern: "("},
		{Name: "a", Type: "regex", Pattern: "x", MaxSpan: 1 << 20},
		{Name: "a", Type: "webhook", URL: "ftp://x"},
		{Name: "a", Type: "webhook", URL: "https://x", Action: "block"},
		{Name: "a", Type: "moderation"},
		{Name: "a", Type: "moderation", Provider: "oai", Action: "mask"},
		{Name: "a", Type: "pii", OnError: "allow"},
		{Name: "a", Type: "webhook", URL: "https://x", OnError: "maybe"},
		{Name: "a", Type: "pii", Pattern: "x"},
	} {
		cfg := Config{Guards: []GuardConfig{g}}
		if err := cfg.Validate(); err == nil {
			t.Errorf("%+v: no error", g)
		}
	}
	dup := Config{Guards: []GuardConfig{piiMask, piiMask}}
	if err := dup.Validate(); err == nil {
		t.Error("a guard defined twice")
	}
	if _, err := New(Config{Guards: []GuardConfig{{Name: "m", Type: "moderation", Provider: "oai"}}}, Options{}); err == nil {
		t.Error("moderation without a Moderator")
	}
}

// TestPatternSpan: a regex guard's span is its pattern's bound, or
// max_span's default when it has none.
func TestPatternSpan(t *testing.T) {
	for _, tt := range []struct {
		p  string
		n  int
		ok bool
	}{{"abc", 3, true}, {"a|bcd", 3, true}, {"é{2}", 4, true}, {"x?[a-z]{3,5}", 6, true}, {"a+", 0, false}, {"(?i)ab", 8, true}, {`\bfoo\b`, 3, true}, {"a{2,}", 0, false}} {
		n, ok := patternSpan(tt.p)
		if ok != tt.ok || ok && n != tt.n {
			t.Errorf("%q: %d %v, want %d %v", tt.p, n, ok, tt.n, tt.ok)
		}
	}
}

// TestErrors: the client's errors are in OpenAI's shape with the status
// the host sends.
func TestErrors(t *testing.T) {
	d := &Decision{Guard: "screen", Err: context.DeadlineExceeded}
	u := (&Result{Verdict: Undecided, Direction: Response, Stop: d}).Error()
	if u.Status != 503 || u.Code != "guard_unavailable" || strings.Contains(u.Message, "deadline") {
		t.Errorf("%+v", u)
	}
	pe := (&Result{Verdict: Allowed}).Error()
	if pe != nil {
		t.Errorf("allowed: %+v", pe)
	}
}

// TestUnquote reads JSON strings as encoding/json does.
func TestUnquote(t *testing.T) {
	for _, raw := range []string{`""`, `"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u20ac"`, `"\ud83d\ude00 x"`, `"\ud800 lone"`, `"\udc00\ud800"`, `"tail\\"`} {
		got, ok := unquote([]byte(raw))
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil || !ok || got != want {
			t.Errorf("%s: got %q %v, want %q (%v)", raw, got, ok, want, err)
		}
	}
	for _, bad := range []string{`"\x"`, `"\u12"`, `"abc`, `"\"`, `x`} {
		if _, ok := unquote([]byte(bad)); ok {
			t.Errorf("%s read", bad)
		}
	}
}
