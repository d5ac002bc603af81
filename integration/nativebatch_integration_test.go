package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers/providertest"
)

// nativeCaddyfile is a gateway with four providers whose batches are
// native by default (oa, openai; claude, anthropic; az, azure_openai's
// classic API; gem, gemini) and one whose batch lines run in the gateway
// (live, openai with batch gateway), all in front of the fake.
const nativeCaddyfile = `{
	admin localhost:2999
	http_port 9080
	https_port 9443
	grace_period 1ns
	skip_install_trust
	log {
		output file {$MG_LOG_DIR}/caddy.log
		level INFO
	}
	metrics
	modelgate {
		provider oa openai {
			base_url {$MG_FAKE}/v1
			api_key {env.MG_OPENAI_KEY}
		}
		provider claude anthropic {
			base_url {$MG_FAKE}
			api_key {env.MG_ANTHROPIC_KEY}
		}
		provider az azure_openai {
			base_url {$MG_FAKE}
			api_key az-test-key
			api_version 2024-10-21
		}
		provider gem gemini {
			base_url {$MG_FAKE}/v1beta
			api_key gem-test-key
		}
		provider live openai {
			batch gateway
			base_url {$MG_FAKE}/v1
			api_key {env.MG_OPENAI_KEY}
		}
		key alice {env.MG_ALICE_KEY}
		batch {
			checkpoint_interval 200ms
			part_lines 25
			lease 3s
			poll_interval 100ms
		}
		storage file_system {$MG_STORAGE}
	}
}

http://localhost:9080 {
	modelgate_auth
	modelgate
}
`

// startNativeGateway starts the fake and loads nativeCaddyfile in front
// of it.
func startNativeGateway(t *testing.T) *providertest.Server {
	t.Helper()
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey, AnthropicKey: anthropicKey})
	t.Setenv("MG_FAKE", fake.URL)
	t.Setenv("MG_LOG_DIR", t.TempDir())
	t.Setenv("MG_STORAGE", storageDir(t))
	t.Setenv("MG_OPENAI_KEY", openAIKey)
	t.Setenv("MG_ANTHROPIC_KEY", anthropicKey)
	t.Setenv("MG_ALICE_KEY", aliceKey)
	caddytest.NewTester(t).InitServer(nativeCaddyfile, "caddyfile")
	return fake
}

// TestNativeBatchModes: the provider types whose API has batches take
// the batch option and default to native; vertex and bedrock only with a
// bucket (batch_bucket), else they run their lines in the gateway, as the
// OpenAI-compatible presets do.
func TestNativeBatchModes(t *testing.T) {
	for _, tc := range []struct {
		typ, config, want string
	}{
		{"openai", `{}`, "native"}, {"azure_openai", `{}`, "native"}, {"anthropic", `{}`, "native"}, {"gemini", `{}`, "native"},
		{"vertex", `{"batch_bucket":"gs://mg-batches"}`, "native"}, {"vertex", `{}`, "gateway"},
		{"vertex", `{"batch_bucket":"gs://mg-batches","batch":"gateway"}`, "gateway"},
		{"bedrock", `{"batch_bucket":"s3://mg-batches","batch_role":"arn:aws:iam::123456789012:role/r"}`, "native"},
		{"bedrock", `{}`, "gateway"},
		{"groq", `{}`, "gateway"}, {"mistral", `{}`, "gateway"}, {"cohere", `{}`, "gateway"},
	} {
		info, err := caddy.GetModule("modelgate.providers." + tc.typ)
		if err != nil {
			t.Fatal(err)
		}
		mod := info.New()
		if err := json.Unmarshal([]byte(tc.config), mod); err != nil {
			t.Fatal(err)
		}
		got := "gateway"
		if nb, ok := mod.(caddygateway.NativeBatcher); ok {
			got = nb.BatchMode()
		}
		if got != tc.want {
			t.Errorf("%s %s: batch mode %s, want %s", tc.typ, tc.config, got, tc.want)
		}
	}
}

// nativeLine is a chat batch line for model, whose user message names
// the line.
func nativeLine(id, model string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":%q,"max_tokens":50,"messages":[{"role":"user","content":"%s says hi"}]}}`, id, model, id)
}

// TestIntegrationNativeBatch runs one batch naming five providers
// through the host: the lines of the four native providers go to their
// batch APIs (one provider batch each: an OpenAI batch, an Azure OpenAI
// global batch of the deployment, an Anthropic message batch and a
// Gemini batch made of translated chat requests), the fifth provider's
// run in the gateway one by one; the batch has one output file with one
// line per input line, each with its custom_id, in the unified shape,
// truthful counts and times, and its usage is priced at the batch price
// for the native lines and at the live price for the others.
func TestIntegrationNativeBatch(t *testing.T) {
	fake := startNativeGateway(t)
	c := sdk(aliceKey)
	var lines []string
	models := map[string]string{}
	for i := range 6 {
		for _, m := range []string{"oa/gpt-4o-mini", "claude/claude-sonnet-4-5", "az/gpt-4o-mini", "gem/gemini-2.5-flash", "live/gpt-4o-mini"} {
			id := fmt.Sprintf("%s-%d", strings.SplitN(m, "/", 2)[0], i)
			lines = append(lines, nativeLine(id, m))
			models[id] = m
		}
	}
	before := scrapeMetrics(t)
	start := time.Now()
	b := newBatch(t, c, uploadLines(t, c, lines).ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	b = waitBatch(t, c, b.ID, 30*time.Second, "completed", "failed")
	after := scrapeMetrics(t)
	if b.Status != "completed" || b.RequestCounts.Total != 30 || b.RequestCounts.Completed != 30 || b.RequestCounts.Failed != 0 {
		t.Fatalf("batch: %s", b.RawJSON())
	}
	if !(b.CreatedAt <= b.InProgressAt && b.InProgressAt <= b.FinalizingAt && b.FinalizingAt <= b.CompletedAt && b.CompletedAt <= time.Now().Unix()) {
		t.Errorf("times out of order: %s", b.RawJSON())
	}
	t.Logf("30 lines across 5 providers completed in %v", time.Since(start))
	if n := fake.BatchesCreated(); n != 2 {
		t.Errorf("%d OpenAI and Azure batches created, want 2", n)
	}
	if n := fake.GeminiBatchesCreated(); n != 1 {
		t.Errorf("%d Gemini batches created, want 1", n)
	}
	if n := fake.AnthropicBatchesCreated(); n != 1 {
		t.Errorf("%d Anthropic message batches created, want 1", n)
	}
	// Only the gateway provider's lines came as live requests.
	for id, n := range sentTimes(fake) {
		if !strings.HasPrefix(id, "live-") || n != 1 {
			t.Errorf("line %s came to the fake as a live request %d times", id, n)
		}
	}
	out := fileLines(t, c, b.OutputFileID)
	if len(out) != 30 || b.ErrorFileID != "" {
		t.Fatalf("%d output lines, error file %q", len(out), b.ErrorFileID)
	}
	want := map[string]pricing.Money{}
	prices := pricing.Default()
	for id, l := range out {
		body := l.Get("response.body")
		if l.Get("response.status_code").Int() != 200 || body.Get("object").Str != "chat.completion" ||
			body.Get("choices.0.message.role").Str != "assistant" || !body.Get("usage.prompt_tokens").Exists() {
			t.Errorf("%s: %s", id, l.Raw)
			continue
		}
		m := models[id]
		provider, model, _ := strings.Cut(m, "/")
		typ := map[string]string{"oa": "openai", "claude": "anthropic", "az": "azure_openai", "gem": "gemini", "live": "openai"}[provider]
		u := pricing.Usage{PromptTokens: body.Get("usage.prompt_tokens").Int(), CompletionTokens: body.Get("usage.completion_tokens").Int()}
		cost, ok := prices.Cost(typ, model, u)
		if provider != "live" {
			cost, ok = prices.BatchCost(typ, model, u)
			if live, _ := prices.Cost(typ, model, u); cost >= live {
				t.Errorf("%s: batch price %v is not below the live price %v", id, cost, live)
			}
		}
		if !ok {
			t.Fatalf("%s has no price", m)
		}
		want[provider+"/"+model] += cost
	}
	// GET /modelgate/usage: the native lines at the batch price.
	status, body, _ := admin(t, http.MethodGet, "/modelgate/usage?group_by=provider,model", "")
	if status != 200 {
		t.Fatalf("usage: %d %s", status, body)
	}
	got := map[string]pricing.Money{}
	requests := map[string]int64{}
	for _, row := range gjson.Get(body, "rows").Array() {
		cost, err := pricing.ParseMoney(row.Get("cost_usd").Str)
		if err != nil {
			t.Fatal(err)
		}
		k := row.Get("provider").Str + "/" + row.Get("model").Str
		got[k], requests[k] = cost, row.Get("requests").Int()
	}
	for k, w := range want {
		if got[k] != w || requests[k] != 6 {
			t.Errorf("usage of %s: %v in %d requests, want %v in 6", k, got[k], requests[k], w)
		}
		// The cost metric, at the same price.
		provider, model, _ := strings.Cut(k, "/")
		sample := fmt.Sprintf(`caddy_modelgate_cost_dollars_total{model=%q,provider=%q}`, model, provider)
		if d := metricValue(after, sample) - metricValue(before, sample); math.Abs(d-w.Dollars()) > 1e-12 {
			t.Errorf("%s grew by %g, want %g", sample, d, w.Dollars())
		}
	}
}

// TestIntegrationNativeBatchCancel cancels a batch whose native parts the
// provider holds: the cancel reaches each provider batch (the fake ends a
// cancelled batch with half of its requests answered, and a held one
// never ends otherwise), the batch ends cancelled once both have, with the
// answered lines in the output file and the others in the error file as
// batch_cancelled.
func TestIntegrationNativeBatchCancel(t *testing.T) {
	fake := startNativeGateway(t)
	fake.HoldBatches(true)
	c := sdk(aliceKey)
	var lines []string
	for i := range 4 {
		lines = append(lines, nativeLine(fmt.Sprintf("oa-%d", i), "oa/gpt-4o-mini"), nativeLine(fmt.Sprintf("claude-%d", i), "claude/claude-sonnet-4-5"))
	}
	b := newBatch(t, c, uploadLines(t, c, lines).ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	deadline := time.Now().Add(20 * time.Second)
	for fake.BatchesCreated() < 1 || fake.AnthropicBatchesCreated() < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the native parts were not submitted: %d and %d", fake.BatchesCreated(), fake.AnthropicBatchesCreated())
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, err := c.Batches.Cancel(context.Background(), b.ID)
	if err != nil || b.Status != "cancelling" {
		t.Fatalf("Cancel: %v %s", err, b.RawJSON())
	}
	b = waitBatch(t, c, b.ID, 30*time.Second, "cancelled")
	if b.RequestCounts.Total != 8 || b.RequestCounts.Completed != 4 || b.RequestCounts.Failed != 4 || b.CancelledAt < b.CancellingAt {
		t.Errorf("cancelled batch: %s", b.RawJSON())
	}
	answered := map[string]int{}
	for id := range fileLines(t, c, b.OutputFileID) {
		answered[strings.SplitN(id, "-", 2)[0]]++
	}
	if answered["oa"] != 2 || answered["claude"] != 2 {
		t.Errorf("answered lines by provider: %v", answered)
	}
	for id, l := range fileLines(t, c, b.ErrorFileID) {
		if l.Get("error.code").Str != "batch_cancelled" {
			t.Errorf("%s: %s", id, l.Raw)
		}
	}
	if n, m := fake.BatchesCreated(), fake.AnthropicBatchesCreated(); n != 1 || m != 1 {
		t.Errorf("%d and %d provider batches, want one each", n, m)
	}
}

// TestIntegrationNativeBatchBudget: a native part is reserved against the
// budget of the key that created its batch before it is sent. A budget
// too small for the reservation refuses the part, which never reaches the
// provider: its lines end in the error file with the budget's 429. One
// that fits sends it, and afterwards the budget has spent what the lines
// cost at the batch price, with nothing left reserved.
func TestIntegrationNativeBatchBudget(t *testing.T) {
	fake := startNativeGateway(t)
	create := func(name, usd string) (id, secret string) {
		t.Helper()
		status, body, _ := admin(t, http.MethodPost, "/modelgate/keys",
			fmt.Sprintf(`{"name":%q,"owner":"team-native","budget":{"usd":%q,"period":"total"}}`, name, usd))
		if status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, status, body)
		}
		return gjson.Get(body, "id").Str, gjson.Get(body, "key").Str
	}
	lines := func(prefix string) []string {
		var out []string
		for i := range 3 {
			out = append(out, nativeLine(fmt.Sprintf("%s-%d", prefix, i), "oa/gpt-4o-mini"))
		}
		return out
	}

	_, poor := create("poor", "0.000001")
	c := sdk(poor)
	b := newBatch(t, c, uploadLines(t, c, lines("poor")).ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	b = waitBatch(t, c, b.ID, 30*time.Second, "completed", "failed")
	if b.RequestCounts.Total != 3 || b.RequestCounts.Failed != 3 || b.OutputFileID != "" {
		t.Errorf("batch over budget: %s", b.RawJSON())
	}
	for id, l := range fileLines(t, c, b.ErrorFileID) {
		if l.Get("response.status_code").Int() != 429 || l.Get("response.body.error.code").Str != "insufficient_quota" {
			t.Errorf("%s: %s", id, l.Raw)
		}
	}
	if n := fake.BatchesCreated(); n != 0 {
		t.Errorf("a part over budget was sent: %d provider batches", n)
	}

	richID, rich := create("rich", "10")
	c = sdk(rich)
	b = newBatch(t, c, uploadLines(t, c, lines("rich")).ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	b = waitBatch(t, c, b.ID, 30*time.Second, "completed", "failed")
	if b.Status != "completed" || b.RequestCounts.Completed != 3 || fake.BatchesCreated() != 1 {
		t.Fatalf("batch within budget: %s, %d provider batches", b.RawJSON(), fake.BatchesCreated())
	}
	var want pricing.Money
	for _, l := range fileLines(t, c, b.OutputFileID) {
		u := l.Get("response.body.usage")
		cost, ok := pricing.Default().BatchCost("openai", "gpt-4o-mini",
			pricing.Usage{PromptTokens: u.Get("prompt_tokens").Int(), CompletionTokens: u.Get("completion_tokens").Int()})
		if !ok || cost == 0 {
			t.Fatalf("no batch price: %s", l.Raw)
		}
		want += cost
	}
	status, body, _ := admin(t, http.MethodGet, "/modelgate/keys/"+richID+"/usage", "")
	if status != 200 {
		t.Fatalf("key usage: %d %s", status, body)
	}
	budget := gjson.Get(body, "status.key.budget")
	spent, err := pricing.ParseMoney(budget.Get("spent_usd").Str)
	if err != nil || spent != want || budget.Get("reserved_usd").Str != "0" {
		t.Errorf("budget after the batch: %s; want spent %v (the batch price), nothing reserved", budget.Raw, want)
	}
}

// TestIntegrationNativeBatchExpiry: a batch whose completion window ends
// while the provider holds its native part: the provider batch is
// cancelled, what it finished is in the output file, the rest are
// batch_expired lines, and the batch is expired.
func TestIntegrationNativeBatchExpiry(t *testing.T) {
	fake := startNativeGateway(t)
	fake.HoldBatches(true)
	c := sdk(aliceKey)
	var lines []string
	for i := range 4 {
		lines = append(lines, nativeLine(fmt.Sprintf("oa-%d", i), "oa/gpt-4o-mini"))
	}
	in := uploadLines(t, c, lines)
	res := post(t, "/v1/batches", aliceKey, fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"3s"}`, in.ID))
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("create: %d %s", res.StatusCode, body)
	}
	b := waitBatch(t, c, gjson.GetBytes(body, "id").Str, 30*time.Second, "expired")
	if b.ExpiredAt == 0 || b.RequestCounts.Total != 4 || b.RequestCounts.Completed != 2 || b.RequestCounts.Failed != 2 {
		t.Errorf("expired batch: %s", b.RawJSON())
	}
	for id, l := range fileLines(t, c, b.ErrorFileID) {
		if l.Get("error.code").Str != "batch_expired" {
			t.Errorf("%s: %s", id, l.Raw)
		}
	}
	if n := fake.BatchesCreated(); n != 1 {
		t.Errorf("%d provider batches, want 1", n)
	}
}
