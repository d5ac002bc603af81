package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/providertest"
)

const batchCaddyfile = "../testdata/caddyfiles/batch.Caddyfile"

// startBatchGateway starts a fake provider and loads testdata's batch
// Caddyfile in front of it, with a fresh storage directory.
func startBatchGateway(t *testing.T) *gateway {
	t.Helper()
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey, AnthropicKey: anthropicKey})
	g := &gateway{fake: fake, logDir: t.TempDir()}
	t.Setenv("MG_FAKE", fake.URL)
	t.Setenv("MG_LOG_DIR", g.logDir)
	t.Setenv("MG_STORAGE", storageDir(t))
	t.Setenv("MG_OPENAI_KEY", openAIKey)
	t.Setenv("MG_ANTHROPIC_KEY", anthropicKey)
	t.Setenv("MG_ALICE_KEY", aliceKey)
	loadBatchCaddyfile(t)
	return g
}

func loadBatchCaddyfile(t *testing.T) {
	t.Helper()
	cfg, err := os.ReadFile(batchCaddyfile)
	if err != nil {
		t.Fatal(err)
	}
	caddytest.NewTester(t).InitServer(string(cfg), "caddyfile")
}

// chatLine is a batch input line for a chat request whose user message is
// "<id> says hi", so the fake's records tell which line a request was.
func chatLine(id, model string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":%q,"max_tokens":50,"messages":[{"role":"user","content":"%s says hi"}]}}`, id, model, id)
}

func uploadLines(tb testing.TB, c openai.Client, lines []string) *openai.FileObject {
	tb.Helper()
	return uploadContent(tb, c, []byte(strings.Join(lines, "\n")+"\n"))
}

func uploadContent(tb testing.TB, c openai.Client, content []byte) *openai.FileObject {
	tb.Helper()
	f, err := c.Files.New(context.Background(), openai.FileNewParams{
		File:    openai.File(bytes.NewReader(content), "input.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch,
	})
	if err != nil {
		tb.Fatalf("Files.New: %v", err)
	}
	if f.Bytes != int64(len(content)) || f.Purpose != "batch" || f.Filename != "input.jsonl" || !strings.HasPrefix(f.ID, "file-") {
		tb.Fatalf("file object %+v", f)
	}
	return f
}

func newBatch(t testing.TB, c openai.Client, fileID string, endpoint openai.BatchNewParamsEndpoint) *openai.Batch {
	t.Helper()
	b, err := c.Batches.New(context.Background(), openai.BatchNewParams{
		InputFileID: fileID, Endpoint: endpoint, CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
		Metadata: map[string]string{"job": t.Name()},
	})
	if err != nil {
		t.Fatalf("Batches.New: %v", err)
	}
	return b
}

// waitBatch polls the batch until its status is one of want, for at most
// limit.
func waitBatch(t *testing.T, c openai.Client, id string, limit time.Duration, want ...openai.BatchStatus) *openai.Batch {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		b, err := c.Batches.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("Batches.Get: %v", err)
		}
		for _, s := range want {
			if b.Status == s {
				return b
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s is %s after %v, want %v: %s", id, b.Status, limit, want, b.RawJSON())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fileLines returns the lines of a file's content, by custom_id; a
// custom_id on two lines fails the test.
func fileLines(t *testing.T, c openai.Client, id string) map[string]gjson.Result {
	t.Helper()
	out := make(map[string]gjson.Result)
	if id == "" {
		return out
	}
	res, err := c.Files.Content(context.Background(), id)
	if err != nil {
		t.Fatalf("Files.Content(%s): %v", id, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		if !gjson.Valid(line) {
			t.Fatalf("file %s has a line that is not JSON: %q", id, line)
		}
		l := gjson.Parse(line)
		cid := l.Get("custom_id").Str
		if _, dup := out[cid]; dup {
			t.Fatalf("file %s has custom_id %q twice", id, cid)
		}
		out[cid] = l
	}
	return out
}

// sentTimes counts the fake's requests per batch line (by the "<id> says
// hi" message).
func sentTimes(fake *providertest.Server) map[string]int {
	n := make(map[string]int)
	for _, r := range fake.Requests() {
		text := gjson.GetBytes(r.Body, "messages.#(role==\"user\").content").Str
		if id, ok := strings.CutSuffix(text, " says hi"); ok {
			n[id]++
		}
	}
	return n
}

// TestIntegrationBatchSDK drives a whole chat batch with the OpenAI SDK:
// upload, create, poll, results, list. Lines go through translation
// (Anthropic), an alias, retries of 429 (flaky) and of 500 (always
// failing), and a provider's 400.
func TestIntegrationBatchSDK(t *testing.T) {
	g := startBatchGateway(t)
	c := sdk(aliceKey)

	var lines []string
	want := map[string]string{} // custom_id -> "ok" or "error"
	add := func(prefix, model, outcome string, n int) {
		for i := range n {
			id := fmt.Sprintf("%s-%d", prefix, i)
			lines = append(lines, chatLine(id, model))
			want[id] = outcome
		}
	}
	add("oa", "oa/gpt-4o-mini", "ok", 30)
	add("claude", "claude/claude-sonnet-4-5", "ok", 10)
	add("alias", "smart", "ok", 5)
	add("flaky", "oa/flaky", "ok", 5)
	add("fail", "oa/fail-500", "error", 2)
	lines = append(lines, `{"custom_id":"bad-400","method":"POST","url":"/v1/chat/completions","body":{"model":"oa/gpt-4o-mini","temperature":7,"messages":[{"role":"user","content":"bad-400 says hi"}]}}`)
	want["bad-400"] = "error"

	in := uploadLines(t, c, lines)
	b := newBatch(t, c, in.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	if b.Status != "validating" || b.InputFileID != in.ID || b.Endpoint != "/v1/chat/completions" || b.CompletionWindow != "24h" ||
		b.ExpiresAt != b.CreatedAt+24*3600 || b.Metadata["job"] != t.Name() || !strings.HasPrefix(b.ID, "batch_") {
		t.Fatalf("new batch: %s", b.RawJSON())
	}
	b = waitBatch(t, c, b.ID, 30*time.Second, "completed", "failed")
	if b.Status != "completed" {
		t.Fatalf("batch ended %s: %s", b.Status, b.RawJSON())
	}
	raw := gjson.Parse(b.RawJSON())
	for _, k := range []string{"in_progress_at", "finalizing_at", "completed_at"} {
		if raw.Get(k).Int() < b.CreatedAt {
			t.Errorf("%s = %s, not a time after created_at: %s", k, raw.Get(k).Raw, b.RawJSON())
		}
	}
	for _, k := range []string{"failed_at", "expired_at", "cancelling_at", "cancelled_at", "errors"} {
		if raw.Get(k).Type != gjson.Null {
			t.Errorf("%s = %s, want null", k, raw.Get(k).Raw)
		}
	}
	if b.InProgressAt > b.FinalizingAt || b.FinalizingAt > b.CompletedAt {
		t.Errorf("timestamps out of order: %s", b.RawJSON())
	}
	if b.RequestCounts.Total != int64(len(lines)) || b.RequestCounts.Completed != 50 || b.RequestCounts.Failed != 3 {
		t.Errorf("request_counts %+v, want total %d, 50 completed, 3 failed", b.RequestCounts, len(lines))
	}
	if b.OutputFileID == "" || b.ErrorFileID == "" {
		t.Fatalf("files: %s", b.RawJSON())
	}

	out, errs := fileLines(t, c, b.OutputFileID), fileLines(t, c, b.ErrorFileID)
	if len(out)+len(errs) != len(lines) {
		t.Errorf("%d output + %d error lines for %d requests", len(out), len(errs), len(lines))
	}
	var usage int64
	for id, outcome := range want {
		l, inOut := out[id]
		if !inOut {
			l = errs[id]
		}
		if inOut != (outcome == "ok") || !l.Exists() {
			t.Errorf("%s: in output file %t, want outcome %s", id, inOut, outcome)
			continue
		}
		if !strings.HasPrefix(l.Get("id").Str, "batch_req_") || l.Get("error").Type != gjson.Null || l.Get("response.request_id").Str == "" {
			t.Errorf("%s: line %s", id, l.Raw)
		}
		status := l.Get("response.status_code").Int()
		switch {
		case outcome == "ok":
			if status != 200 || l.Get("response.body.object").Str != "chat.completion" ||
				l.Get("response.body.choices.0.message.content").Str != "echo: "+id+" says hi" {
				t.Errorf("%s: %s", id, l.Raw)
			}
			usage += l.Get("response.body.usage.total_tokens").Int()
		case id == "bad-400":
			if status != 400 || l.Get("response.body.error.message").Str == "" {
				t.Errorf("%s: %s", id, l.Raw)
			}
		default:
			if status != 500 || l.Get("response.body.error.type").Str == "" {
				t.Errorf("%s: %s", id, l.Raw)
			}
		}
	}
	if b.Usage.TotalTokens != usage || usage == 0 || b.Usage.InputTokens+b.Usage.OutputTokens != usage {
		t.Errorf("usage %+v, want total %d summed from the output", b.Usage, usage)
	}

	// What the providers saw: one request per line, two for each flaky one
	// (429, retry-after-ms honoured, then answered), three for each 500
	// (max_retries 2); the alias tries its second target after claude.
	sent := sentTimes(g.fake)
	for id := range want {
		n := 1
		switch {
		case strings.HasPrefix(id, "flaky"):
			n = 2
		case strings.HasPrefix(id, "fail"):
			n = 3
		}
		if sent[id] != n {
			t.Errorf("%s sent %d times, want %d", id, sent[id], n)
		}
	}

	// The files are batch_output files of alice, and listed.
	of, err := c.Files.Get(context.Background(), b.OutputFileID)
	if err != nil || of.Purpose != "batch_output" || of.Bytes == 0 {
		t.Errorf("output file %+v, %v", of, err)
	}
	page, err := c.Batches.List(context.Background(), openai.BatchListParams{})
	if err != nil || len(page.Data) == 0 || page.Data[0].ID != b.ID {
		t.Errorf("Batches.List: %v %+v", err, page)
	}
}

// TestIntegrationBatchRerank runs a rerank batch.
func TestIntegrationBatchRerank(t *testing.T) {
	startBatchGateway(t)
	c := sdk(aliceKey)
	var lines []string
	for i := range 12 {
		lines = append(lines, fmt.Sprintf(`{"custom_id":"r%d","method":"POST","url":"/v1/rerank","body":{"model":"co/rerank-v3.5","query":"red fox","documents":["blue sky","a red fox","red"],"top_n":2}}`, i))
	}
	in := uploadLines(t, c, lines)
	b := newBatch(t, c, in.ID, "/v1/rerank")
	b = waitBatch(t, c, b.ID, 20*time.Second, "completed", "failed")
	if b.Status != "completed" || b.RequestCounts.Completed != 12 || b.ErrorFileID != "" {
		t.Fatalf("batch: %s", b.RawJSON())
	}
	if gjson.Get(b.RawJSON(), "usage").Exists() {
		t.Errorf("a rerank batch has no token usage: %s", b.RawJSON())
	}
	for id, l := range fileLines(t, c, b.OutputFileID) {
		res := l.Get("response.body.results")
		if len(res.Array()) != 2 || res.Get("0.index").Int() != 1 || res.Get("0.relevance_score").Float() < res.Get("1.relevance_score").Float() {
			t.Errorf("%s: %s", id, l.Raw)
		}
	}
}

// TestIntegrationBatchCancel cancels a running batch with the SDK: it is
// cancelling at once, cancelled within 5 s, keeps its finished results,
// and reports every other line as batch_cancelled.
func TestIntegrationBatchCancel(t *testing.T) {
	startBatchGateway(t)
	c := sdk(aliceKey)
	var lines []string
	for i := range 200 {
		lines = append(lines, chatLine(fmt.Sprintf("c%d", i), "oa/slow-200ms"))
	}
	in := uploadLines(t, c, lines)
	b := newBatch(t, c, in.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	deadline := time.Now().Add(20 * time.Second)
	for b.RequestCounts.Completed < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("no progress: %s", b.RawJSON())
		}
		time.Sleep(50 * time.Millisecond)
		b = waitBatch(t, c, b.ID, time.Second, "in_progress")
	}
	b, err := c.Batches.Cancel(context.Background(), b.ID)
	if err != nil || b.Status != "cancelling" || b.CancellingAt == 0 {
		t.Fatalf("Cancel: %v %s", err, b.RawJSON())
	}
	b = waitBatch(t, c, b.ID, 5*time.Second, "cancelled")
	if b.CancelledAt < b.CancellingAt || b.RequestCounts.Total != 200 ||
		b.RequestCounts.Completed+b.RequestCounts.Failed != 200 || b.RequestCounts.Completed < 8 {
		t.Errorf("cancelled batch: %s", b.RawJSON())
	}
	out, errs := fileLines(t, c, b.OutputFileID), fileLines(t, c, b.ErrorFileID)
	if int64(len(out)) != b.RequestCounts.Completed || int64(len(errs)) != b.RequestCounts.Failed {
		t.Errorf("%d output and %d error lines for counts %+v", len(out), len(errs), b.RequestCounts)
	}
	for id, l := range errs {
		if l.Get("error.code").Str != "batch_cancelled" || l.Get("response").Type != gjson.Null {
			t.Errorf("%s: %s", id, l.Raw)
		}
	}
	// Cancelling again returns the cancelled batch.
	if again, err := c.Batches.Cancel(context.Background(), b.ID); err != nil || again.Status != "cancelled" {
		t.Errorf("second cancel: %v %+v", err, again)
	}
}

// TestIntegrationBatchExpiry runs a batch whose completion window ends
// while lines are still waiting: it expires, and each unfinished line is
// in the error file as batch_expired.
func TestIntegrationBatchExpiry(t *testing.T) {
	startBatchGateway(t)
	c := sdk(aliceKey)
	var lines []string
	for i := range 100 {
		lines = append(lines, chatLine(fmt.Sprintf("e%d", i), "oa/slow-300ms"))
	}
	in := uploadLines(t, c, lines)
	// The SDK only sends "24h"; the gateway takes any shorter duration.
	res := post(t, "/v1/batches", aliceKey, fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"2s"}`, in.ID))
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("create: %d %s", res.StatusCode, body)
	}
	id := gjson.GetBytes(body, "id").Str
	if gjson.GetBytes(body, "expires_at").Int() != gjson.GetBytes(body, "created_at").Int()+2 {
		t.Errorf("expires_at: %s", body)
	}
	b := waitBatch(t, c, id, 10*time.Second, "expired")
	if b.ExpiredAt == 0 || b.RequestCounts.Completed+b.RequestCounts.Failed != 100 || b.RequestCounts.Failed == 0 {
		t.Errorf("expired batch: %s", b.RawJSON())
	}
	out, errs := fileLines(t, c, b.OutputFileID), fileLines(t, c, b.ErrorFileID)
	if len(out)+len(errs) != 100 {
		t.Errorf("%d + %d result lines", len(out), len(errs))
	}
	for id, l := range errs {
		if l.Get("error.code").Str != "batch_expired" || l.Get("error.message").Str == "" {
			t.Errorf("%s: %s", id, l.Raw)
		}
	}
}

// TestIntegrationBatchValidation: a file with bad lines fails the batch
// with errors.data naming each bad line, and nothing is sent upstream.
func TestIntegrationBatchValidation(t *testing.T) {
	g := startBatchGateway(t)
	c := sdk(aliceKey)
	good := chatLine("ok-1", "oa/gpt-4o-mini")
	for _, tc := range []struct {
		name  string
		lines []string
		want  map[int]string // line -> error code
	}{
		{"bad json", []string{good, `{"custom_id":`}, map[int]string{2: "invalid_json"}},
		{"duplicate custom_id", []string{good, good}, map[int]string{2: "duplicate_custom_id"}},
		{"method", []string{strings.Replace(good, `"POST"`, `"GET"`, 1)}, map[int]string{1: "invalid_method"}},
		{"url", []string{good, strings.Replace(chatLine("x", "oa/gpt-4o-mini"), "/v1/chat/completions", "/v1/embeddings", 1)}, map[int]string{2: "invalid_url"}},
		{"unroutable model", []string{good, chatLine("y", "nobody/knows")}, map[int]string{2: "invalid_request"}},
		{"several, with a blank line", []string{`[1]`, "", good, chatLine("z", "nope"), good}, map[int]string{1: "invalid_json", 4: "invalid_request", 5: "duplicate_custom_id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(g.fake.Requests())
			in := uploadLines(t, c, tc.lines)
			b := newBatch(t, c, in.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
			b = waitBatch(t, c, b.ID, 10*time.Second, "failed", "in_progress", "completed")
			if b.Status != "failed" || b.FailedAt == 0 || b.OutputFileID != "" || b.ErrorFileID != "" {
				t.Fatalf("batch: %s", b.RawJSON())
			}
			got := map[int]string{}
			for _, e := range b.Errors.Data {
				got[int(e.Line)] = e.Code
				if e.Message == "" {
					t.Errorf("error without message: %+v", e)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("errors %v, want %v: %s", got, tc.want, b.RawJSON())
			}
			if n := len(g.fake.Requests()); n != before {
				t.Errorf("%d requests went upstream", n-before)
			}
		})
	}
}

// TestIntegrationBatchMaxRequests: a 50,000-line file is accepted and
// runs; a 50,001-line file fails naming line 50,001.
func TestIntegrationBatchMaxRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("uploads two 50,000-line files")
	}
	startBatchGateway(t)
	c := sdk(aliceKey)
	lines := make([]string, 50001)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"custom_id":"%d","method":"POST","url":"/v1/chat/completions","body":{"model":"oa/slow-2000ms","messages":[{"role":"user","content":"hi"}]}}`, i)
	}
	over := newBatch(t, c, uploadLines(t, c, lines).ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	full := newBatch(t, c, uploadLines(t, c, lines[:50000]).ID, openai.BatchNewParamsEndpointV1ChatCompletions)

	over = waitBatch(t, c, over.ID, 60*time.Second, "failed", "in_progress")
	if over.Status != "failed" || len(over.Errors.Data) != 1 || over.Errors.Data[0].Line != 50001 || over.Errors.Data[0].Code != "too_many_requests" {
		t.Errorf("50,001 lines: %s", over.RawJSON())
	}
	full = waitBatch(t, c, full.ID, 60*time.Second, "failed", "in_progress")
	if full.Status != "in_progress" || full.RequestCounts.Total != 50000 {
		t.Fatalf("50,000 lines: %s", full.RawJSON())
	}
	if _, err := c.Batches.Cancel(context.Background(), full.ID); err != nil {
		t.Fatal(err)
	}
	full = waitBatch(t, c, full.ID, 60*time.Second, "cancelled")
	if full.RequestCounts.Completed+full.RequestCounts.Failed != 50000 {
		t.Errorf("cancelled 50,000-line batch: %s", full.RawJSON())
	}
}

// TestIntegrationBatchIsolation: another owner's key gets 404 for alice's
// files and batches, and its lists do not show them.
func TestIntegrationBatchIsolation(t *testing.T) {
	startBatchGateway(t)
	alice, bob := sdk(aliceKey), sdk(bobKey)
	in := uploadLines(t, alice, []string{chatLine("a", "oa/gpt-4o-mini")})
	b := newBatch(t, alice, in.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	waitBatch(t, alice, b.ID, 10*time.Second, "completed")

	notFound := func(what string, err error) {
		t.Helper()
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Errorf("bob %s: %v, want 404", what, err)
		}
	}
	ctx := context.Background()
	_, err := bob.Files.Get(ctx, in.ID)
	notFound("Files.Get", err)
	content, err := bob.Files.Content(ctx, in.ID)
	if err == nil {
		content.Body.Close()
	}
	notFound("Files.Content", err)
	_, err = bob.Files.Delete(ctx, in.ID)
	notFound("Files.Delete", err)
	_, err = bob.Batches.Get(ctx, b.ID)
	notFound("Batches.Get", err)
	_, err = bob.Batches.Cancel(ctx, b.ID)
	notFound("Batches.Cancel", err)
	_, err = bob.Batches.New(ctx, openai.BatchNewParams{InputFileID: in.ID, Endpoint: "/v1/chat/completions", CompletionWindow: "24h"})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Errorf("bob's batch on alice's file: %v", err)
	}

	bobFile := uploadLines(t, bob, []string{chatLine("b", "oa/gpt-4o-mini")})
	files, err := bob.Files.List(ctx, openai.FileListParams{})
	if err != nil || len(files.Data) != 1 || files.Data[0].ID != bobFile.ID {
		t.Errorf("bob's files: %v %+v", err, files)
	}
	batches, err := bob.Batches.List(ctx, openai.BatchListParams{})
	if err != nil || len(batches.Data) != 0 {
		t.Errorf("bob's batches: %v %+v", err, batches)
	}
	// Alice still has hers: input and output file, and the batch.
	files, err = alice.Files.List(ctx, openai.FileListParams{})
	if err != nil || len(files.Data) != 2 {
		t.Errorf("alice's files: %v %+v", err, files)
	}
}

// TestIntegrationFilesAPI covers the Files API's edges: content round
// trip, list order and paging, delete, purpose, size limit, no key.
func TestIntegrationFilesAPI(t *testing.T) {
	startBatchGateway(t)
	c := sdk(aliceKey)
	ctx := context.Background()
	var ids []string
	for i := range 3 {
		ids = append(ids, uploadLines(t, c, []string{chatLine(fmt.Sprint(i), "oa/gpt-4o-mini")}).ID)
	}
	res, err := c.Files.Content(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(body) != chatLine("1", "oa/gpt-4o-mini")+"\n" {
		t.Errorf("content %q", body)
	}

	list := func(q string) []string {
		t.Helper()
		r := getWithKey(t, "/v1/files"+q, aliceKey)
		b, _ := io.ReadAll(r.Body)
		var got []string
		for _, d := range gjson.GetBytes(b, "data.#.id").Array() {
			got = append(got, d.Str)
		}
		return got
	}
	if got := list(""); fmt.Sprint(got) != fmt.Sprint([]string{ids[2], ids[1], ids[0]}) {
		t.Errorf("default order %v", got)
	}
	if got := list("?order=asc&limit=2"); fmt.Sprint(got) != fmt.Sprint(ids[:2]) {
		t.Errorf("asc, limit 2: %v", got)
	}
	if got := list("?after=" + ids[2]); fmt.Sprint(got) != fmt.Sprint([]string{ids[1], ids[0]}) {
		t.Errorf("after newest: %v", got)
	}
	del, err := c.Files.Delete(ctx, ids[0])
	if err != nil || !del.Deleted || del.ID != ids[0] {
		t.Errorf("delete: %v %+v", err, del)
	}
	if _, err := c.Files.Get(ctx, ids[0]); err == nil {
		t.Errorf("deleted file still there")
	}

	// Wrong purpose: 400; too large: 413, with and without Content-Length.
	_, err = c.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader("x"), "a.txt", "text/plain"), Purpose: "assistants"})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "purpose" {
		t.Errorf("purpose assistants: %v", err)
	}
	big := bytes.Repeat([]byte("x"), 8<<20+1)
	for _, chunked := range []bool{false, true} {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("purpose", "batch")
		fw, _ := mw.CreateFormFile("file", "big.jsonl")
		_, _ = fw.Write(big)
		_ = mw.Close()
		var rd io.Reader = &buf
		if chunked {
			rd = io.MultiReader(&buf) // hides the length: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, gatewayBase+"/v1/files", rd)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		wantErrorShape(t, r, http.StatusRequestEntityTooLarge, "file_too_large")
		r.Body.Close()
	}
	if got := list(""); len(got) != 2 {
		t.Errorf("files after refused uploads: %v", got)
	}

	// No key: 401; no such file: 404 in the error shape.
	r := getWithKey(t, "/v1/files", "")
	wantErrorShape(t, r, http.StatusUnauthorized, "invalid_api_key")
	r = getWithKey(t, "/v1/files/file-doesnotexist", aliceKey)
	wantErrorShape(t, r, http.StatusNotFound, "")
	r = getWithKey(t, "/v1/batches/batch_../../etc", aliceKey)
	wantErrorShape(t, r, http.StatusNotFound, "")
}

// TestIntegrationBatchReload reloads the config while a batch runs: the
// batch goes on under the new config, and no line is sent twice.
func TestIntegrationBatchReload(t *testing.T) {
	g := startBatchGateway(t)
	c := sdk(aliceKey)
	var lines []string
	for i := range 120 {
		lines = append(lines, chatLine(fmt.Sprintf("r%d", i), "oa/slow-100ms"))
	}
	in := uploadLines(t, c, lines)
	b := newBatch(t, c, in.ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	deadline := time.Now().Add(20 * time.Second)
	for b.RequestCounts.Completed < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("no progress: %s", b.RawJSON())
		}
		time.Sleep(50 * time.Millisecond)
		b = waitBatch(t, c, b.ID, time.Second, "in_progress")
	}
	for _, workers := range []string{"4", "12"} { // two reloads, each a changed config
		t.Setenv("MG_WORKERS", workers)
		loadBatchCaddyfile(t)
		time.Sleep(200 * time.Millisecond)
	}
	b = waitBatch(t, c, b.ID, 30*time.Second, "completed", "failed", "cancelled")
	if b.Status != "completed" || b.RequestCounts.Completed != 120 {
		t.Fatalf("after reloads: %s", b.RawJSON())
	}
	if out := fileLines(t, c, b.OutputFileID); len(out) != 120 {
		t.Errorf("%d output lines", len(out))
	}
	for id, n := range sentTimes(g.fake) {
		if n != 1 {
			t.Errorf("%s sent %d times", id, n)
		}
	}
}

func getWithKey(t *testing.T, path, key string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, gatewayBase+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}
