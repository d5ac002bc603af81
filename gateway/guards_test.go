package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/guardrails"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providertest/streamtexts"
	"github.com/modelgate/modelgate/quota"
)

// recordingUpstream keeps the bodies a provider was sent.
type recordingUpstream struct {
	Upstream
	mu     sync.Mutex
	bodies [][]byte
}

func (u *recordingUpstream) Send(ctx context.Context, req providers.Request, stream bool, w http.ResponseWriter) error {
	u.mu.Lock()
	u.bodies = append(u.bodies, bytes.Clone(req.Body))
	u.mu.Unlock()
	return u.Upstream.Send(ctx, req, stream, w)
}

// sent is everything the provider was sent, joined.
func (u *recordingUpstream) sent() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return string(bytes.Join(u.bodies, []byte("\n")))
}

// guardObserver keeps the guards' decisions.
type guardObserver struct {
	countingObserver
	decisions []guardrails.Decision
	models    []string
}

func (o *guardObserver) Guarded(_ *Call, model string, ds []guardrails.Decision) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.decisions = append(o.decisions, ds...)
	o.models = append(o.models, model)
}

// actions returns the actions decided, as "guard:action".
func (o *guardObserver) actions() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, d := range o.decisions {
		out = append(out, d.Guard+":"+d.Action.String())
	}
	return out
}

// guardTest is a test gateway with guards, whose providers' bodies are
// recorded.
type guardTest struct {
	*testGateway
	sent map[string]*recordingUpstream
	obs  *guardObserver
}

// newGuardTest makes a test gateway with the guards gs.
func newGuardTest(t testing.TB, gs ...guardrails.GuardConfig) *guardTest {
	t.Helper()
	g := newTestGateway(t)
	gt := &guardTest{testGateway: g, sent: map[string]*recordingUpstream{}, obs: &guardObserver{}}
	for name, p := range g.cfg.Providers {
		up := &recordingUpstream{Upstream: p.Upstream}
		p.Upstream, gt.sent[name] = up, up
	}
	eng, err := guardrails.New(guardrails.Config{Guards: gs}, guardrails.Options{Moderator: Moderator(g.cfg.Providers)})
	if err != nil {
		t.Fatal(err)
	}
	g.cfg.Guards, g.cfg.Observer = eng, gt.obs
	g.rebuild(t)
	return gt
}

// sentTo is what every provider was sent, joined.
func (gt *guardTest) sentTo() string {
	var b strings.Builder
	for _, u := range gt.sent {
		b.WriteString(u.sent())
	}
	return b.String()
}

var (
	piiRequest  = guardrails.GuardConfig{Name: "pii", Type: "pii", Apply: []string{"request"}}
	piiResponse = guardrails.GuardConfig{Name: "pii-out", Type: "pii", Apply: []string{"response"}}
	banned      = guardrails.GuardConfig{Name: "banned", Type: "regex", Pattern: "(?i)project +falcon", Action: "block"}
)

// guardCalls are a call of each API and path through the core, with text
// in the places the guards read.
func guardCalls(text string) []struct {
	name string
	api  API
	body string
} {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	t := q(text)
	return []struct {
		name string
		api  API
		body string
	}{
		{"chat", APIChat, `{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":` + t + `}]}`},
		{"chat translated", APIChat, `{"model":"claude/claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":` + t + `}]}`},
		{"chat tool result", APIChat, `{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"look it up"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"find","arguments":` + q(`{"q":`+t+`}`) + `}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":` + t + `}]}`},
		{"responses native", APIResponses, `{"model":"oa/gpt-4o-mini","store":false,"input":` + t + `}`},
		{"responses translated", APIResponses, `{"model":"claude/claude-sonnet-4-5","store":false,"input":` + t + `}`},
		{"messages native", APIMessages, `{"model":"claude/claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":` + t + `}]}`},
		{"messages translated", APIMessages, `{"model":"oa/gpt-4o-mini","max_tokens":50,"messages":[{"role":"user","content":` + t + `}]}`},
		{"count_tokens", APICountTokens, `{"model":"claude/claude-sonnet-4-5","messages":[{"role":"user","content":` + t + `}]}`},
		{"embeddings", APIEmbeddings, `{"model":"oa/text-embedding-3-small","input":[` + t + `,"plain"]}`},
		{"rerank", APIRerank, `{"model":"co/rerank-v3.5","query":` + t + `,"documents":["a","b"]}`},
	}
}

// TestGuardDecisionsCounted: every decision of a call, a stream's
// included, is counted in its guard's tally, and the observer is told of
// a call's decisions only when a guard did more than allow.
func TestGuardDecisionsCounted(t *testing.T) {
	gt := newGuardTest(t, piiRequest, piiResponse)
	tally := func(i int, a guardrails.Action) uint64 { return gt.cfg.Guards.Tally(i).Count(a) }
	for _, body := range []string{
		`{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"hello"}]}`,
		`{"model":"oa/gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hello"}]}`,
	} {
		if o, s := gt.serve(t, APIChat, []byte(body), gt.static); o.Status != 200 {
			t.Fatalf("%d %s", o.Status, answer(o, s))
		}
	}
	if got := gt.obs.actions(); len(got) != 0 {
		t.Errorf("the observer was told of decisions that allowed: %v", got)
	}
	if o, s := gt.serve(t, APIChat, []byte(`{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"mail bob@example.com"}]}`), gt.static); o.Status != 200 {
		t.Fatalf("%d %s", o.Status, answer(o, s))
	}
	if got := gt.obs.actions(); !slices.Equal(got, []string{"pii:mask"}) {
		t.Errorf("the observer was told %v, want the mask", got)
	}
	for _, w := range []struct {
		guard  int
		action guardrails.Action
		want   uint64
	}{{0, guardrails.Allow, 2}, {0, guardrails.Mask, 1}, {1, guardrails.Allow, 3}, {1, guardrails.Mask, 0}} {
		if got := tally(w.guard, w.action); got != w.want {
			t.Errorf("guard %d %s: %d, want %d", w.guard, w.action, got, w.want)
		}
	}
}

// TestGuardsRequestMasked: on every API and path — translated, passed
// through natively, count_tokens, tool calls and tool results — what the
// provider is sent has the request guard's placeholders in place of what
// it matched, and the call is answered.
func TestGuardsRequestMasked(t *testing.T) {
	gt := newGuardTest(t, piiRequest)
	for _, tc := range guardCalls("mail bob@example.com today") {
		t.Run(tc.name, func(t *testing.T) {
			for _, u := range gt.sent {
				u.bodies = nil
			}
			o, s := gt.serve(t, tc.api, []byte(tc.body), gt.static)
			sent := gt.sentTo()
			if o.Status != 200 || sent == "" {
				t.Fatalf("%d %s; sent %q", o.Status, answer(o, s), sent)
			}
			if strings.Contains(sent, "bob@example.com") || !strings.Contains(sent, "[EMAIL]") {
				t.Errorf("the provider was sent %s", sent)
			}
		})
	}
	if got := gt.obs.actions(); len(got) != len(guardCalls("")) || got[0] != "pii:mask" {
		t.Errorf("decisions %v", got)
	}
}

// TestGuardsRequestBlocked: a blocked request gets 400 content_blocked
// naming the guard, in its API's shape (Anthropic's on the Messages API),
// and no provider is sent anything.
func TestGuardsRequestBlocked(t *testing.T) {
	gt := newGuardTest(t, banned)
	for _, tc := range guardCalls("tell me about Project  Falcon") {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := gt.serve(t, tc.api, []byte(tc.body), gt.static)
			if o.Status != 400 || o.Err == nil || o.Err.Code != "content_blocked" || o.Retryable {
				t.Fatalf("%d %s", o.Status, o.Body)
			}
			msg := gjson.GetBytes(o.Body, "error.message").Str
			if !strings.Contains(msg, `guard "banned"`) {
				t.Errorf("message %q does not name the guard", msg)
			}
			if tc.api.Anthropic() {
				if gjson.GetBytes(o.Body, "type").Str != "error" || gjson.GetBytes(o.Body, "error.type").Str != "invalid_request_error" {
					t.Errorf("not Anthropic's shape: %s", o.Body)
				}
			} else if gjson.GetBytes(o.Body, "error.code").Str != "content_blocked" {
				t.Errorf("not OpenAI's shape: %s", o.Body)
			}
		})
	}
	if sent := gt.sentTo(); sent != "" {
		t.Errorf("a provider was sent %s", sent)
	}
}

// TestGuardsAfterAdmission: a call its limits refuse costs no guard call;
// an admitted call a guard refuses counts as a request but spends no
// tokens.
func TestGuardsAfterAdmission(t *testing.T) {
	gt := newGuardTest(t, banned)
	gt.withLimits(t, staticPolicies{key: quota.Subject{Limits: quota.Limits{RequestsPerMinute: 1}}})
	gt.cfg.Observer = gt.obs
	gt.rebuild(t)
	body := chatBody("oa/gpt-4o-mini", "", "Project Falcon")
	if o, _ := gt.serve(t, APIChat, body, gt.static); o.Status != 400 {
		t.Fatalf("first: %d %s", o.Status, o.Body)
	}
	if o, _ := gt.serve(t, APIChat, body, gt.static); o.Status != 429 {
		t.Fatalf("second: %d %s", o.Status, o.Body)
	}
	if got := gt.obs.actions(); len(got) != 1 || got[0] != "banned:block" {
		t.Errorf("decisions %v: the refused call was guarded", got)
	}
}

// TestGuardsRoutedModel: a guard of a target catches an alias that routes
// to it, and only calls that reach it.
func TestGuardsRoutedModel(t *testing.T) {
	g := banned
	g.Models = []string{"oa/gpt-4o-mini"}
	gt := newGuardTest(t, g)
	gt.cfg.Aliases = map[string][]string{"fast": {"oa/gpt-4o-mini"}}
	gt.rebuild(t)
	if o, _ := gt.serve(t, APIChat, chatBody("fast", "", "Project Falcon"), gt.static); o.Status != 400 {
		t.Errorf("alias: %d %s", o.Status, o.Body)
	}
	if o, _ := gt.serve(t, APIChat, chatBody("claude/claude-sonnet-4-5", `,"max_tokens":50`, "Project Falcon"), gt.static); o.Status != 200 {
		t.Errorf("another model: %d %s", o.Status, o.Body)
	}
	if len(gt.obs.models) == 0 || gt.obs.models[0] != "fast" {
		t.Errorf("models %v", gt.obs.models)
	}
}

// TestGuardsAnswer: an answer guard masks a non-streamed answer (the fake
// echoes the prompt), and one that blocks answers 400 content_blocked
// while what the answer used is still settled.
func TestGuardsAnswer(t *testing.T) {
	gt := newGuardTest(t, piiResponse)
	for _, tc := range guardCalls("mail bob@example.com today") {
		if tc.api == APICountTokens || tc.api == APIEmbeddings || tc.api == APIRerank {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			o, _ := gt.serve(t, tc.api, []byte(tc.body), gt.static)
			if o.Status != 200 || strings.Contains(string(o.Body), "bob@example.com") || !strings.Contains(string(o.Body), "[EMAIL]") {
				t.Errorf("%d %s", o.Status, o.Body)
			}
			if !strings.Contains(gt.sentTo(), "bob@example.com") {
				t.Error("a response-only guard masked the request")
			}
		})
	}
	block := banned
	block.Apply = []string{"response"}
	gb := newGuardTest(t, block)
	o, _ := gb.serve(t, APIChat, chatBody("oa/gpt-4o-mini", "", "Project Falcon"), gb.static)
	if o.Status != 400 || o.Err.Code != "content_blocked" || !strings.Contains(o.Err.Message, "answer") || !o.Settled || !o.Usage.Known {
		t.Errorf("%d %s settled %v usage %+v", o.Status, o.Body, o.Settled, o.Usage)
	}
}

// TestGuardAnswer: the function a kept answer (a cache hit) goes through
// runs the answer guards as they are now.
func TestGuardAnswer(t *testing.T) {
	gt := newGuardTest(t, piiResponse)
	c := &Call{API: APIChat, Key: gt.static, Log: gt.log}
	rq := &request{endpoint: endpointChat, model: "oa/gpt-4o-mini"}
	body, pe := gt.guardAnswer(context.Background(), c, rq, []byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"at bob@example.com"}}]}`))
	if pe != nil || !strings.Contains(string(body), "[EMAIL]") {
		t.Errorf("%s %v", body, pe)
	}
}

// TestGuardsStream: stream: true is no way around an answer guard — the
// fake echoes the prompt, and the stream carries it masked, on every
// streaming API and path; a blocking guard ends the stream with the API's
// error event before the matched text, and the call is still settled.
func TestGuardsStream(t *testing.T) {
	gt := newGuardTest(t, piiResponse)
	block := banned
	block.Apply = []string{"response"}
	gb := newGuardTest(t, block)
	for _, tc := range guardCalls("write to bob@example.com or Project Falcon now") {
		if tc.api == APICountTokens || tc.api == APIEmbeddings || tc.api == APIRerank {
			continue
		}
		body := []byte(strings.Replace(tc.body, `"model"`, `"stream":true,"model"`, 1))
		t.Run(tc.name, func(t *testing.T) {
			o, s := gt.serve(t, tc.api, body, gt.static)
			got := s.body.String()
			if o.Status != 200 || !o.Streamed || strings.Contains(got, "bob@example") || !strings.Contains(got, "[EMAIL]") {
				t.Fatalf("%d streamed %v: %s", o.Status, o.Streamed, got)
			}
			if tc.api == APIChat && !strings.HasSuffix(got, "data: [DONE]\n\n") {
				t.Errorf("the stream does not end with [DONE]: %s", got)
			}
			o, s = gb.serve(t, tc.api, body, gb.static)
			got = s.body.String()
			if !o.Streamed || strings.Contains(strings.ToLower(got), "falcon") || !strings.Contains(got, "content_blocked") && !strings.Contains(got, `guard \"banned\"`) {
				t.Errorf("blocked stream: %s", got)
			}
			if !o.Settled {
				t.Error("a blocked stream was not settled")
			}
		})
	}
}

// TestGuardsBatchLine: a batch line is a call like any: a blocked line
// answers 400 content_blocked, final; a masked one reaches the provider
// masked.
func TestGuardsBatchLine(t *testing.T) {
	gt := newGuardTest(t, banned, piiRequest)
	ex := gt.BatchExecutor()
	line := func(text string) batch.Request {
		return batch.Request{BatchID: "batch_x", CustomID: "l1", Owner: "bench", KeyName: "bench", Endpoint: batch.EndpointChat,
			Body: chatBody("oa/gpt-4o-mini", "", text)}
	}
	resp := ex.Do(context.Background(), line("Project Falcon"))
	if resp.Status != 400 || !resp.Final || gjson.GetBytes(resp.Body, "error.code").Str != "content_blocked" {
		t.Errorf("blocked line: %+v %s", resp, resp.Body)
	}
	resp = ex.Do(context.Background(), line("to bob@example.com"))
	if sent := gt.sentTo(); resp.Status != 200 || strings.Contains(sent, "bob@") || !strings.Contains(sent, "[EMAIL]") {
		t.Errorf("masked line: %d, sent %s", resp.Status, sent)
	}
}

// TestGuardsExposureReadsOriginal: a managed key pasted into a prompt is
// reported exposed even when a guard masks it before the provider sees
// it.
func TestGuardsExposureReadsOriginal(t *testing.T) {
	gt := newGuardTest(t, piiRequest)
	obs := gt.obs
	o, _ := gt.serve(t, APIChat, chatBody("oa/gpt-4o-mini", "", "my key is "+gt.managedKey), gt.static)
	if o.Status != 200 || strings.Contains(gt.sentTo(), gt.managedKey) {
		t.Fatalf("%d; sent %s", o.Status, gt.sentTo())
	}
	gt.exposures.wait()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.exposed) != 1 {
		t.Errorf("%d keys reported exposed", len(obs.exposed))
	}
}

// TestGuardsModeration: a moderation guard asks the provider's moderation
// endpoint through its upstream; a trigger word blocks.
func TestGuardsModeration(t *testing.T) {
	gt := newGuardTest(t, guardrails.GuardConfig{Name: "moderation", Type: "moderation", Provider: "oa"})
	o, _ := gt.serve(t, APIChat, chatBody("claude/claude-sonnet-4-5", `,"max_tokens":50`, "I will attack them"), gt.static)
	if o.Status != 400 || !strings.Contains(o.Err.Message, "violence") {
		t.Errorf("%d %s", o.Status, o.Body)
	}
	if sent := gt.sent["oa"].sent(); !strings.Contains(sent, `"input"`) || !strings.Contains(sent, "attack") {
		t.Errorf("the moderation endpoint was sent %s", sent)
	}
	if sent := gt.sent["claude"].sent(); sent != "" {
		t.Errorf("the provider was sent %s", sent)
	}
	if o, _ := gt.serve(t, APIChat, chatBody("claude/claude-sonnet-4-5", `,"max_tokens":50`, "a calm day"), gt.static); o.Status != 200 {
		t.Errorf("calm: %d %s", o.Status, o.Body)
	}
}

// TestGuardsStoredResponse: a translated Responses answer the answer
// guards masked is stored masked — streamed or not — so that GET
// /v1/responses/{id} gives back what the client got; one they blocked is
// not stored.
func TestGuardsStoredResponse(t *testing.T) {
	block := banned
	block.Apply = []string{"response"}
	gt := newGuardTest(t, piiResponse, block)
	get := func(id string) *Outcome {
		gt.cfg.Responses.Writes.Wait()
		o := &Outcome{}
		gt.StoredResponse(context.Background(), StoredRequest{Method: http.MethodGet, Owner: gt.static.StorageOwner(), ID: id}, o)
		return o
	}
	for _, stream := range []string{"", `"stream":true,`} {
		body := `{"model":"claude/claude-sonnet-4-5",` + stream + `"input":"mail bob@example.com today"}`
		o, s := gt.serve(t, APIResponses, []byte(body), gt.static)
		id := gjson.GetBytes(o.Body, "id").Str
		if o.Streamed {
			id = gjson.Get(strings.SplitN(strings.SplitN(s.body.String(), "data: ", 2)[1], "\n", 2)[0], "response.id").Str
		}
		if o.Status != 200 || id == "" {
			t.Fatalf("%s: %d %s", stream, o.Status, answer(o, s))
		}
		got := get(id)
		if got.Status != 200 || strings.Contains(string(got.Body), "bob@example.com") || !strings.Contains(string(got.Body), "[EMAIL]") {
			t.Errorf("%s stored: %d %s", stream, got.Status, got.Body)
		}
	}
	o, _ := gt.serve(t, APIResponses, []byte(`{"model":"claude/claude-sonnet-4-5","input":"Project Falcon"}`), gt.static)
	if o.Status != 400 {
		t.Fatalf("blocked: %d %s", o.Status, o.Body)
	}
	gt.cfg.Responses.Writes.Wait()
	keys, err := gt.cfg.Responses.Storage.List(context.Background(), "", true)
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for _, k := range keys {
		if strings.HasSuffix(k, ".json") {
			stored++
		}
	}
	if stored != 2 {
		t.Errorf("stored %d responses, want the 2 allowed: %v", len(keys), keys)
	}
}

// TestGuardsStreamToolCalls: a streamed tool call's arguments are texts
// too — the fake calls the offered tool with the prompt as its query, its
// arguments cut in pieces — masked as they flow, on chat and on the
// Messages API.
func TestGuardsStreamToolCalls(t *testing.T) {
	gt := newGuardTest(t, piiResponse)
	tools := `"tools":[{"type":"function","function":{"name":"find","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}],`
	for _, tc := range []struct {
		name string
		api  API
		body string
	}{
		{"chat", APIChat, `{"model":"oa/gpt-4o-mini","stream":true,` + tools + `"messages":[{"role":"user","content":"find bob@example.com"}]}`},
		{"chat translated", APIChat, `{"model":"claude/claude-sonnet-4-5","max_tokens":50,"stream":true,` + tools + `"messages":[{"role":"user","content":"find bob@example.com"}]}`},
		{"messages native", APIMessages, `{"model":"claude/claude-sonnet-4-5","max_tokens":50,"stream":true,` +
			`"tools":[{"name":"find","input_schema":{"type":"object","properties":{"query":{"type":"string"}}}}],"messages":[{"role":"user","content":"find bob@example.com"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, s := gt.serve(t, tc.api, []byte(tc.body), gt.static)
			got := s.body.String()
			if o.Status != 200 || !o.Streamed || strings.Contains(got, "bob@example") || !strings.Contains(got, "[EMAIL]") {
				t.Errorf("%d: %s", o.Status, got)
			}
			if !strings.Contains(got, "tool_calls") && !strings.Contains(got, "input_json_delta") {
				t.Errorf("no tool call streamed: %s", got)
			}
		})
	}
}

// TestStreamGuardFraming: the guarded sink cuts events wherever the
// writes cut them, whatever their line ends ("\n", "\r\n"), passes
// comments on, and guards an event the stream ended without its blank
// line. Each write is made from one buffer, overwritten once the write
// returns: the sink keeps nothing of it. Nothing is written after the
// stream finished.
func TestStreamGuardFraming(t *testing.T) {
	gt := newGuardTest(t, piiResponse)
	chunk := func(s string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}]}`
	}
	// Enough text that the buffers of the sink and of the guards fill, and
	// move what they keep to their front, while the guards hold events.
	long := strings.Repeat("and so on ", 300)
	for _, tc := range []struct {
		name, eol string
		done      bool
		write     int
	}{
		{"lf", "\n", true, 1},
		{"crlf", "\r\n", true, 1},
		{"no [DONE], no last blank line", "\n", false, 1},
		{"writes of 7 bytes", "\n", true, 7},
		{"writes of 4 KiB", "\n", true, 4 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := ": keep-alive" + tc.eol + tc.eol
			for _, p := range []string{"write to b", "ob@exam", "ple.com ", "today"} {
				stream += chunk(p) + tc.eol + tc.eol
			}
			for i := 0; i < len(long); i += 13 {
				stream += chunk(long[i:min(i+13, len(long))]) + tc.eol + tc.eol
			}
			if tc.done {
				stream += "data: [DONE]" + tc.eol + tc.eol
			} else {
				stream = strings.TrimSuffix(stream, tc.eol+tc.eol)
			}
			sink := &recordingSink{}
			c := &Call{API: APIChat, Key: gt.static, Sink: sink, Log: gt.log}
			rq := &request{endpoint: endpointChat, model: "oa/gpt-4o-mini", stream: true}
			_, sg := gt.streamSink(context.Background(), c, rq, gt.guardsOf(c, rq, nil, nil), sink)
			writeCut(t, sg, stream, tc.write)
			sg.finish()
			got := sink.body.String()
			if _, err := sg.Write([]byte(chunk("after the end") + "\n\n")); err != nil || sink.body.String() != got {
				t.Errorf("a write after the end: %v, %q", err, strings.TrimPrefix(sink.body.String(), got))
			}
			var text strings.Builder
			for _, ev := range strings.Split(got, "\n\n") {
				if d, ok := strings.CutPrefix(ev, "data: {"); ok {
					text.WriteString(gjson.Get("{"+d, "choices.0.delta.content").Str)
				}
			}
			if text.String() != "write to [EMAIL] today"+long || !strings.HasPrefix(got, ": keep-alive") {
				t.Errorf("text %q; stream %q", text.String(), got)
			}
			if tc.done != strings.HasSuffix(got, "data: [DONE]\n\n") {
				t.Errorf("the end of the stream: %q", got)
			}
		})
	}
}

// TestStreamGuardSendsAsItCame: with nothing to mask, a guarded chat
// stream reaches the client byte for byte as the provider wrote it,
// however its writes cut it (the events held across writes are sent from
// the guards' copies: each write's buffer is overwritten once the write
// returns). Masked, the events before the masked one are still as they
// came, and the text is the masked text.
func TestStreamGuardSendsAsItCame(t *testing.T) {
	gt := newGuardTest(t, piiResponse)
	chunk := func(s string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}]}` + "\n\n"
	}
	var stream, text strings.Builder
	stream.WriteString(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for i := range 200 {
		stream.WriteString(chunk(fmt.Sprintf(" word%d", i)))
		fmt.Fprintf(&text, " word%d", i)
	}
	stream.WriteString(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" + "data: [DONE]\n\n")
	plain := stream.String()
	masked := strings.Replace(plain, " word7\"", " bob@example.com\"", 1)
	before := plain[:strings.Index(plain, " word6\"")] // the events before the masked one's
	for _, write := range []int{1, 7, 250, 4 << 10, len(plain)} {
		for _, in := range []string{plain, masked} {
			got := string(gt.sendStream(t, APIChat, endpointChat, in, write))
			if in == plain {
				if got != plain {
					t.Errorf("writes of %d bytes: the client got\n%.400q\nwant\n%.400q", write, got, plain)
				}
				continue
			}
			var sent strings.Builder
			for _, ev := range strings.Split(got, "\n\n") {
				if d, ok := strings.CutPrefix(ev, "data: {"); ok {
					sent.WriteString(gjson.Get("{"+d, "choices.0.delta.content").Str)
				}
			}
			if want := strings.Replace(text.String(), " word7", " [EMAIL]", 1); sent.String() != want || !strings.HasPrefix(got, before) {
				t.Errorf("writes of %d bytes, masked: the text %q, want %q; the events before it as they came: %v", write, sent.String(), want, strings.HasPrefix(got, before))
			}
		}
	}
}

// sendStream runs stream, the events a call of api writes for its
// client, through gt's guarded sink in writes of n bytes, and returns what
// the client got.
func (gt *guardTest) sendStream(t *testing.T, api API, e *endpoint, stream string, n int) []byte {
	t.Helper()
	sink := &recordingSink{}
	c := &Call{API: api, Key: gt.static, Sink: sink, Log: gt.log}
	rq := &request{endpoint: e, model: "oa/gpt-4o-mini", stream: true}
	_, sg := gt.streamSink(context.Background(), c, rq, gt.guardsOf(c, rq, nil, nil), sink)
	writeCut(t, sg, stream, n)
	sg.finish()
	return sink.body.Bytes()
}

// writeCut writes stream to sg n bytes at a time, each write from one
// buffer, overwritten once the write returns: the sink keeps nothing of it.
func writeCut(t *testing.T, sg *streamGuard, stream string, n int) {
	t.Helper()
	var buf []byte
	for i := 0; i < len(stream); i += n {
		buf = append(buf[:0], stream[i:min(i+n, len(stream))]...)
		if _, err := sg.Write(buf); err != nil {
			t.Fatal(err)
		}
		for j := range buf {
			buf[j] = '#'
		}
	}
}

// TestStreamGuardFlows: a guarded stream of text and tool calls reaches
// the client as the provider sends it: the chunk that opens the choice at
// once, the text one event late and its last words with the first tool
// call, the calls' arguments as soon as their guards release them — not
// the whole answer at its end.
func TestStreamGuardFlows(t *testing.T) {
	gt := newGuardTest(t, piiResponse)
	sink := &recordingSink{}
	c := &Call{API: APIChat, Key: gt.static, Sink: sink, Log: gt.log}
	rq := &request{endpoint: endpointChat, model: "oa/gpt-4o-mini", stream: true}
	_, sg := gt.streamSink(context.Background(), c, rq, gt.guardsOf(c, rq, nil, nil), sink)
	head := `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":`
	args := func(s string) string {
		return head + `{"tool_calls":[{"index":0,"function":{"arguments":"` + s + `"}}]},"finish_reason":null}]}` + "\n\n"
	}
	writes := []struct {
		event string
		sent  int // events the client has after it
	}{
		{head + `{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n", 1},
		{head + `{"content":"Let me"},"finish_reason":null}]}` + "\n\n", 1},
		{head + `{"content":" check."},"finish_reason":null}]}` + "\n\n", 2},
		{args(`{\"city\":\"`), 4},
		{args(`Paris\"}`), 5},
		{head + `{},"finish_reason":"tool_calls"}]}` + "\n\n", 6},
		{"data: [DONE]\n\n", 7},
	}
	for i, w := range writes {
		if _, err := sg.Write([]byte(w.event)); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(sink.body.String(), "\n\n"); n != w.sent {
			t.Errorf("after write %d: the client has %d events, want %d: %q", i, n, w.sent, sink.body.String())
		}
	}
	sg.finish()
}

// TestGuardsCache: a cached answer goes through the answer guards as they
// are now — one stored before a guard was added comes back masked, or
// blocked — and the cache stores a guarded stream as the client got it;
// a request a guard blocks is not looked up.
func TestGuardsCache(t *testing.T) {
	g := newTestGateway(t)
	g.withCache(t)
	cache := g.cfg.Cache
	body := chatBody("oa/gpt-4o-mini", "", "mail bob@example.com about Project Falcon")
	if o, _ := g.serve(t, APIChat, body, g.static); o.Status != 200 || !strings.Contains(string(o.Body), "bob@example.com") {
		t.Fatalf("unguarded: %d %s", o.Status, o.Body)
	}

	// The same cache, guards added since.
	gt := newGuardTest(t, piiResponse)
	gt.cfg.Cache = cache
	gt.rebuild(t)
	o, _ := gt.serve(t, APIChat, body, gt.static)
	if o.Status != 200 || headerValue(o.Header, "X-Modelgate-Cache") != "hit" || strings.Contains(string(o.Body), "bob@example.com") || !strings.Contains(string(o.Body), "[EMAIL]") {
		t.Errorf("hit, masked: %d %v %s", o.Status, o.Header, o.Body)
	}
	stream := chatBody("oa/gpt-4o-mini", `,"stream":true`, "mail bob@example.com about Project Falcon")
	if o, s := gt.serve(t, APIChat, stream, gt.static); o.Status != 200 || strings.Contains(s.body.String(), "bob@example") {
		t.Errorf("hit, streamed: %d %s", o.Status, s.body.String())
	}

	block := banned
	block.Apply = []string{"response"}
	gb := newGuardTest(t, block)
	gb.cfg.Cache = cache
	gb.rebuild(t)
	o, _ = gb.serve(t, APIChat, body, gb.static)
	if o.Status != 400 || o.Err.Code != "content_blocked" {
		t.Errorf("hit, blocked: %d %s", o.Status, o.Body)
	}

	// A miss whose stream a guard masks is stored as the client got it.
	fresh := chatBody("oa/gpt-4o-mini", `,"stream":true`, "write to carol@example.com now")
	o, s := gt.serve(t, APIChat, fresh, gt.static)
	if o.Status != 200 || strings.Contains(s.body.String(), "carol@") {
		t.Fatalf("miss: %d %s", o.Status, s.body.String())
	}
	g.rebuild(t) // no guards, the same cache
	o, s = g.serve(t, APIChat, fresh, g.static)
	if headerValue(o.Header, "X-Modelgate-Cache") != "hit" || strings.Contains(s.body.String(), "carol@") {
		t.Errorf("the stored stream: %v %s", o.Header, s.body.String())
	}

	// A request a guard blocks never reaches the cache.
	gr := newGuardTest(t, banned)
	obs := gr.withCache(t)
	if o, _ := gr.serve(t, APIChat, body, gr.static); o.Status != 400 || len(obs.lookups) != 0 {
		t.Errorf("blocked: %d, lookups %v", o.Status, obs.lookups)
	}
}

// FuzzStreamGuard: however the events the gateway writes for the client
// are cut into writes, and whatever their framing, nothing panics; in a
// stream of events a client can read, a guard that only logs sends the
// client each text as the provider sent it, and a guard that masks sends
// each text masked as a whole body's is.
func FuzzStreamGuard(f *testing.F) {
	chunk := func(s string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}]}` + "\n\n"
	}
	for _, s := range []struct {
		stream string
		api    uint8
	}{
		{chunk("Hi bob") + chunk(" mail al") + chunk("ice@example.org") + `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" + "data: [DONE]\n\n", 0},
		{": keep-alive\n\n" + chunk("a\\nb") + "data: not json\n\n" + chunk(" c"), 0},
		// Tool calls after text: they end it, and flow.
		{chunk("Mail bob@exa") + `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"to\":\"al"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ice@example.org\"}"}}]}}]}` + "\n\n" + chunk("mple.com"), 0},
		// JSON after white space, which a client's parser reads: guarded
		// too (it passed as if it were no JSON).
		{"data:  {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"mail bob@example.com\"},\"finish_reason\":\"stop\"}]}\n\n", 0},
		// Data of two lines: sent on two data lines (it went on one data
		// line and a line no client reads as data).
		{"data: {\"choices\":[{\"index\":0,\n" + "data: \"delta\":{\"content\":\"mail bob@example.com\"}}]}\n\n", 0},
		{"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"call +1 202 \"}\r\n\r\n" +
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"555 0173\"}\n\n", 1},
		{"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ssn 321-54-\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"9876\"}}", 2},
	} {
		f.Add(s.stream, s.api, uint8(0))
		f.Add(s.stream, s.api, uint8(6))
	}
	gt := newGuardTest(f, guardrails.GuardConfig{Name: "audit", Type: "pii", Action: "log", Apply: []string{"response"}})
	mt := newGuardTest(f, piiResponse)
	whole, err := guardrails.New(guardrails.Config{Guards: []guardrails.GuardConfig{piiRequest}}, guardrails.Options{})
	if err != nil {
		f.Fatal(err)
	}
	apis := []struct {
		api      API
		endpoint *endpoint
	}{{APIChat, endpointChat}, {APIResponses, endpointResponses}, {APIMessages, endpointMessages}}
	f.Fuzz(func(t *testing.T, stream string, api, write uint8) {
		a := apis[int(api)%len(apis)]
		n := int(write%64) + 1
		logged := gt.sendStream(t, a.api, a.endpoint, stream, n)
		masked := mt.sendStream(t, a.api, a.endpoint, stream, n)
		for _, x := range []*guardTest{gt, mt} {
			x.obs.mu.Lock()
			x.obs.decisions, x.obs.models = x.obs.decisions[:0], x.obs.models[:0] // a fuzz run's are many
			x.obs.mu.Unlock()
		}
		events := streamtexts.Data([]byte(stream))
		if !streamtexts.Readable(events) {
			return
		}
		name, _ := guardAPI(a.api)
		want := streamtexts.Texts(name.String(), events)
		got := streamtexts.Texts(name.String(), streamtexts.Data(logged))
		if k, differ := streamtexts.Differ(want, got); differ {
			t.Fatalf("text %s: the client got %q, want %q; it got\n%q", k, got[k], want[k], logged)
		}
		if streamtexts.Reopened(name.String(), events) {
			return // a text that goes on after its end is two texts to the guard
		}
		got = streamtexts.Texts(name.String(), streamtexts.Data(masked))
		for k, w := range want {
			if strings.ContainsAny(w, "\x00\uFFFD") {
				continue // not UTF-8, or a NUL
			}
			body, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": w}}})
			if m := gjson.GetBytes(whole.Request(context.Background(), guardrails.Chat, body, nil).Body, "messages.0.content").Str; got[k] != m {
				t.Fatalf("text %s masked: the client got %q, want %q; it got\n%q", k, got[k], m, masked)
			}
		}
	})
}
