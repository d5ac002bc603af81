package guardrails

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// screeningService is a fake screening service on loopback: it blocks
// texts that say "forbidden", masks "Alice" and allows the rest; the
// model names a misbehaviour (slow, 500, garbage, short).
func screeningService(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "bad call", http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var in struct {
			Guard, Direction, API, Model, Key, Account string
			Texts                                      []string
		}
		if err := json.Unmarshal(b, &in); err != nil || in.Guard != "screen" || in.API == "" || in.Direction == "" {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		switch in.Model {
		case "slow":
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
			return
		case "fail":
			http.Error(w, "down", http.StatusInternalServerError)
			return
		case "garbage":
			_, _ = io.WriteString(w, `{"action": "perhaps"}`)
			return
		case "short":
			_, _ = io.WriteString(w, `{"action":"mask","texts":[]}`)
			return
		}
		joined := strings.Join(in.Texts, " ")
		switch {
		case strings.Contains(joined, "forbidden"):
			_, _ = io.WriteString(w, `{"action":"block","reason":"forbidden topic for `+in.Account+`"}`)
		case strings.Contains(joined, "Alice"):
			out := make([]string, len(in.Texts))
			for i, s := range in.Texts {
				out[i] = strings.ReplaceAll(s, "Alice", "[NAME]")
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"action": "mask", "texts": out})
		default:
			_, _ = io.WriteString(w, `{"action":"allow"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// TestWebhook: allow, block with the service's reason, masked texts, and
// every way a service can fail, closed (503) or open.
func TestWebhook(t *testing.T) {
	srv, calls := screeningService(t)
	guard := func(onError string) GuardConfig {
		return GuardConfig{Name: "screen", Type: "webhook", URL: srv.URL + "/check", Timeout: Duration(200 * time.Millisecond),
			OnError: onError, Headers: map[string]string{"Authorization": "Bearer s3cret"}}
	}
	closed := newEngine(t, Options{}, guard(""))
	open := newEngine(t, Options{}, guard("allow"))
	body := func(s string) []byte {
		b, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": s}, map[string]any{"role": "assistant", "content": "ok"}}})
		return b
	}
	ctx := context.Background()
	tests := []struct {
		name, model, text string
		e                 *Engine
		verdict           Verdict
		action            Action
		status            int
		want              string
	}{
		{"allow", "m", "hello", closed, Allowed, Allow, 0, "hello"},
		{"block", "m", "a forbidden thing", closed, Blocked, Block, 400, ""},
		{"mask", "m", "ask Alice and Alice", closed, Allowed, Mask, 0, "ask [NAME] and [NAME]"},
		{"slow, closed", "slow", "hello", closed, Undecided, Error, 503, ""},
		{"500, closed", "fail", "hello", closed, Undecided, Error, 503, ""},
		{"garbage, closed", "garbage", "hello", closed, Undecided, Error, 503, ""},
		{"wrong count, closed", "short", "hello", closed, Undecided, Error, 503, ""},
		{"slow, open", "slow", "hello", open, Allowed, Error, 0, "hello"},
		{"500, open", "fail", "hello", open, Allowed, Error, 0, "hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.e.Request(ctx, Chat, body(tt.text), &Scope{Models: []string{tt.model}, Key: "k", Account: "acme"})
			if r.Verdict != tt.verdict || len(r.Decisions) != 1 || r.Decisions[0].Action != tt.action {
				t.Fatalf("verdict %d, decisions %+v", r.Verdict, r.Decisions)
			}
			if tt.status != 0 {
				if pe := r.Error(); pe == nil || pe.Status != tt.status || strings.Contains(pe.Message, srv.URL) {
					t.Fatalf("error %+v", pe)
				}
				if tt.action == Block && !strings.Contains(r.Error().Message, "forbidden topic for acme") {
					t.Errorf("the service's reason is lost: %s", r.Error().Message)
				}
				return
			}
			var got struct{ Messages []struct{ Content string } }
			if err := json.Unmarshal(r.Body, &got); err != nil || got.Messages[0].Content != tt.want || got.Messages[1].Content != "ok" {
				t.Errorf("body %s", r.Body)
			}
			if tt.action == Error && r.Decisions[0].Err == nil {
				t.Error("a failed-open decision without its error")
			}
		})
	}
	// A body without texts costs no call.
	before := calls.Load()
	closed.Request(ctx, Embeddings, []byte(`{"input":[[1,2]]}`), nil)
	if calls.Load() != before {
		t.Error("called the service for no text")
	}
}

// TestWebhookStream: a streamed answer is screened a window at a time, and
// a block stops it before the window is sent.
func TestWebhookStream(t *testing.T) {
	srv, calls := screeningService(t)
	e := newEngine(t, Options{}, GuardConfig{Name: "screen", Type: "webhook", URL: srv.URL, StreamWindow: 16,
		Headers: map[string]string{"Authorization": "Bearer s3cret"}})
	var events [][]byte
	for _, p := range strings.Fields("Ask Alice about the weather in the north today") {
		events = append(events, chatChunk(p+" "))
	}
	sent, d := runStream(t, e.AnswerStream(Chat, &Scope{Models: []string{"m"}}), events, true)
	if d != nil {
		t.Fatal(d)
	}
	var text string
	for _, ev := range sent {
		var c struct {
			Choices []struct{ Delta struct{ Content string } }
		}
		if err := json.Unmarshal(ev, &c); err != nil || len(c.Choices) == 0 {
			t.Fatalf("event %s: %v", ev, err)
		}
		text += c.Choices[0].Delta.Content
	}
	if text != "Ask [NAME] about the weather in the north today " || calls.Load() < 3 {
		t.Errorf("text %q after %d calls", text, calls.Load())
	}
	sent, d = runStream(t, e.AnswerStream(Chat, &Scope{Models: []string{"m"}}), [][]byte{chatChunk("this is a forbidden "), chatChunk("answer, long enough")}, true)
	if d == nil || d.Action != Block {
		t.Fatalf("decision %+v", d)
	}
	for _, ev := range sent {
		if strings.Contains(string(ev), "forbidden") {
			t.Errorf("sent %s", ev)
		}
	}
}

// fakeModerator answers like a provider's moderation endpoint: texts that
// say "hate" are flagged harassment and hate.
type fakeModerator struct {
	err   error
	calls []string // provider/model of each call
}

func (f *fakeModerator) Moderate(ctx context.Context, provider, model string, texts []string) (Moderation, error) {
	f.calls = append(f.calls, provider+"/"+model)
	if f.err != nil {
		return Moderation{}, f.err
	}
	for _, t := range texts {
		if strings.Contains(t, "hate") {
			return Moderation{Flagged: true, Categories: []string{"harassment", "hate"}}, nil
		}
	}
	return Moderation{}, nil
}

// TestModeration: a flag blocks (or only the configured categories do),
// and a failing endpoint fails closed.
func TestModeration(t *testing.T) {
	m := &fakeModerator{}
	e := newEngine(t, Options{Moderator: m}, GuardConfig{Name: "moderation", Type: "moderation", Provider: "oai", Model: "omni-moderation-latest"})
	body := []byte(`{"messages":[{"role":"user","content":"I hate this"}]}`)
	ctx := context.Background()
	r := e.Request(ctx, Chat, body, nil)
	if r.Verdict != Blocked || !strings.Contains(r.Error().Message, "harassment, hate") || m.calls[0] != "oai/omni-moderation-latest" {
		t.Fatalf("%+v %v", r, m.calls)
	}
	if r := e.Request(ctx, Chat, []byte(`{"messages":[{"role":"user","content":"fine"}]}`), nil); r.Verdict != Allowed {
		t.Errorf("fine: %+v", r)
	}
	only := newEngine(t, Options{Moderator: m}, GuardConfig{Name: "violence", Type: "moderation", Provider: "oai", Categories: []string{"violence"}})
	if r := only.Request(ctx, Chat, body, nil); r.Verdict != Allowed || r.Decisions[0].Found[1] != "hate" {
		t.Errorf("other categories: %+v", r)
	}
	logOnly := newEngine(t, Options{Moderator: m}, GuardConfig{Name: "watch", Type: "moderation", Provider: "oai", Action: "log"})
	if r := logOnly.Request(ctx, Chat, body, nil); r.Verdict != Allowed || r.Decisions[0].Action != Log || !r.Decisions[0].Matched {
		t.Errorf("log: %+v", r)
	}
	m.err = errors.New("upstream 502")
	if r := e.Request(ctx, Chat, body, nil); r.Verdict != Undecided || r.Error().Status != 503 {
		t.Errorf("failing endpoint: %+v", r)
	}
}

// TestModerationWire: the moderation body and answer in OpenAI's shape.
func TestModerationWire(t *testing.T) {
	if got := string(ModerationRequest("omni-moderation-latest", []string{"a", `"b"`})); got != `{"model":"omni-moderation-latest","input":["a","\"b\""]}` {
		t.Errorf("request %s", got)
	}
	v, err := ParseModeration([]byte(`{"id":"modr-1","model":"omni-moderation-latest","results":[{"flagged":false,"categories":{"hate":false}},{"flagged":true,"categories":{"hate":false,"violence":true,"self-harm/intent":true},"category_scores":{"violence":0.9}}]}`))
	if err != nil || !v.Flagged || strings.Join(v.Categories, ",") != "violence,self-harm/intent" {
		t.Errorf("%+v %v", v, err)
	}
	for _, bad := range []string{``, `{}`, `{"results":[]}`, `{"results":[{"categories":{}}]}`, `[`} {
		if _, err := ParseModeration([]byte(bad)); err == nil {
			t.Errorf("%q read", bad)
		}
	}
}

// TestWebhookErrorKeepsURLTokens: the error of a service that cannot be
// reached, which the host logs, does not quote its URL, whose query may
// hold a token.
func TestWebhookErrorKeepsURLTokens(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close() // nothing listens there any more
	e := newEngine(t, Options{}, GuardConfig{Name: "screen", Type: "webhook", URL: addr + "/check?token=tok-s3cret-77",
		Timeout: Duration(time.Second)})
	r := e.Request(context.Background(), Chat, []byte(`{"messages":[{"role":"user","content":"hello"}]}`), nil)
	if r.Verdict != Undecided || r.Stop == nil || r.Stop.Err == nil {
		t.Fatalf("verdict %d, stop %+v", r.Verdict, r.Stop)
	}
	if msg := r.Stop.Err.Error(); strings.Contains(msg, "tok-s3cret-77") || strings.Contains(msg, addr) {
		t.Errorf("the error quotes the URL: %s", msg)
	}
}
