package batch_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/gemini"
	"github.com/modelgate/modelgate/providers/openai"
	"github.com/modelgate/modelgate/providers/providertest"
)

// httpSend is the transport the host gives a native batch API, here over
// plain HTTP to base: the base URL and req's path and query, with the
// header auth sets.
func httpSend(base string, auth func(h http.Header)) providers.Send {
	return func(ctx context.Context, req providers.Request) (providers.Answer, error) {
		u := base + req.Path
		if req.Query != "" {
			u += "?" + req.Query
		}
		var body io.Reader = bytes.NewReader(req.Body)
		length := int64(len(req.Body))
		if req.Upload != nil {
			body, length = req.Upload, req.Length
		}
		method := req.Method
		if method == "" {
			method = http.MethodPost
		}
		hr, err := http.NewRequestWithContext(ctx, method, u, body)
		if err != nil {
			return providers.Answer{}, err
		}
		hr.ContentLength = length
		for k, v := range req.Header {
			hr.Header[k] = v
		}
		auth(hr.Header)
		res, err := http.DefaultClient.Do(hr) //nolint:bodyclose // the Answer's Body, which its reader closes
		if err != nil {
			return providers.Answer{}, err
		}
		return providers.Answer{Status: res.StatusCode, Header: res.Header, Body: res.Body}, nil
	}
}

// routeExecutor routes "<provider>/<model>" to provider, upstream model
// <model>; gateway lines are not expected in these tests.
type routeExecutor struct{ ran atomic.Int64 }

func (e *routeExecutor) Check(_ string, body []byte, _ []string) (batch.Route, error) {
	m := gjson.GetBytes(body, "model").Str
	prov, model, ok := strings.Cut(m, "/")
	if !ok {
		return batch.Route{}, errors.New("model must be <provider>/<model>")
	}
	return batch.Route{Model: m, Provider: prov, Upstream: model}, nil
}

func (e *routeExecutor) Do(context.Context, batch.Request) batch.Response {
	e.ran.Add(1)
	return batch.Response{Status: 500, Body: []byte(`{"error":{"message":"no gateway here","type":"server_error","param":null,"code":null}}`)}
}

func testSettings() batch.Settings {
	return batch.Settings{Workers: 8, PerProvider: 8, MaxRequests: 60000, MaxLineBytes: 1 << 20, MaxRetries: 1,
		RetryBackoff: 5 * time.Millisecond, CheckpointInterval: 20 * time.Millisecond, PartLines: 1000, Lease: 500 * time.Millisecond,
		NativePoll: 5 * time.Millisecond, NativePollMax: 20 * time.Millisecond, NativeSubmitTimeout: 5 * time.Second}
}

func live(ex batch.Executor, apis map[string]batch.NativeAPI) func() (batch.Live, bool) {
	return func() (batch.Live, bool) {
		return batch.Live{Settings: testSettings(), Executor: ex, Logger: zap.NewNop(),
			Native: func(p string) batch.NativeAPI { return apis[p] }}, true
	}
}

// run creates a batch of lines for owner "o" and waits for status.
func run(t *testing.T, st *batch.Store, lines []string, status string) batch.Batch {
	t.Helper()
	ctx := context.Background()
	f, err := st.PutFile(ctx, "o", "in.jsonl", batch.PurposeBatch, strings.NewReader(strings.Join(lines, "\n")+"\n"), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.CreateBatch(ctx, "o", batch.CreateParams{InputFileID: f.ID, Endpoint: batch.EndpointChat, CompletionWindow: "24h", Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return waitStatus(t, st, b.ID, status)
}

func waitStatus(t *testing.T, st *batch.Store, id, status string) batch.Batch {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b, err := st.GetBatch(context.Background(), "o", id)
		if err != nil {
			t.Fatal(err)
		}
		if b.Status == status {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s is %s with %+v, want %s", id, b.Status, b.RequestCounts, status)
		}
	}
}

// results reads the output and error files: the body of each line by
// custom_id, and how many lines each custom_id has.
func results(t *testing.T, st *batch.Store, b batch.Batch) (map[string]gjson.Result, map[string]int) {
	t.Helper()
	lines, counts := map[string]gjson.Result{}, map[string]int{}
	for _, id := range []*string{b.OutputFileID, b.ErrorFileID} {
		if id == nil {
			continue
		}
		_, rc, err := st.OpenFile(context.Background(), "o", *id)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(rc)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			l := gjson.ParseBytes(bytes.Clone(sc.Bytes()))
			lines[l.Get("custom_id").Str] = l
			counts[l.Get("custom_id").Str]++
		}
		rc.Close()
	}
	return lines, counts
}

func chatLine(id, model, extra string) string {
	return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"model":%q,"messages":[{"role":"user","content":"say %s"}]%s}}`, id, model, id, extra)
}

// TestNativeOpenAIAndAzureBatches runs one batch whose lines go to
// OpenAI's Batch API and to Azure OpenAI's global batch (the fakes),
// through the transport, with a line each provider answers with an error
// and results out of order.
func TestNativeOpenAIAndAzureBatches(t *testing.T) {
	fake := providertest.Start(t, providertest.Options{OpenAIKey: "sk-test", Keys: map[string]string{"azure_openai_batch": "az-key"}})
	oa := openai.Batches{Send: httpSend(fake.URL+"/v1", func(h http.Header) { h.Set("Authorization", "Bearer sk-test") })}
	az := openai.Batches{Send: httpSend(fake.URL, func(h http.Header) { h.Set("Api-Key", "az-key") }),
		Prefix: "/openai", Query: "api-version=2024-10-21", Endpoint: func(e string) string { return strings.TrimPrefix(e, "/v1") },
		Model: func(m string) string { return "dep-" + m }}
	ex := &routeExecutor{}
	st := batch.NewStore(storagetest.NewMemory(), "mg")
	r := batch.NewRunner(st, "inst", 10*time.Millisecond, live(ex, map[string]batch.NativeAPI{"openai": oa, "azure": az}))
	t.Cleanup(func() { _ = r.Destruct() })

	var lines []string
	for i := range 6 {
		extra := ""
		if i == 2 {
			extra = `,"temperature":7` // the provider refuses this one
		}
		lines = append(lines, chatLine(fmt.Sprintf("oa-%d", i), "openai/gpt-4o-mini", extra), chatLine(fmt.Sprintf("az-%d", i), "azure/gpt-4o", extra))
	}
	b := run(t, st, lines, batch.StatusCompleted)
	got, counts := results(t, st, b)
	if len(counts) != 12 {
		t.Fatalf("%d custom_ids in the results, want 12", len(counts))
	}
	for id, n := range counts {
		if n != 1 {
			t.Errorf("%s has %d result lines", id, n)
		}
	}
	for _, p := range []string{"oa", "az"} {
		for i := range 6 {
			l := got[fmt.Sprintf("%s-%d", p, i)]
			status := l.Get("response.status_code").Int()
			switch {
			case i == 2 && status != 400:
				t.Errorf("%s-2: %s, want the provider's 400", p, l.Raw)
			case i != 2 && (status != 200 || l.Get("response.body.choices.0.message.content").Str != fmt.Sprintf("echo: say %s-%d", p, i)):
				t.Errorf("%s-%d: %s", p, i, l.Raw)
			}
		}
	}
	if got["az-0"].Get("response.body.model").Str != "dep-gpt-4o" {
		t.Errorf("the Azure line did not name the deployment: %s", got["az-0"].Raw)
	}
	if b.RequestCounts != (batch.RequestCounts{Total: 12, Completed: 10, Failed: 2}) {
		t.Errorf("request_counts = %+v", b.RequestCounts)
	}
	if fake.BatchesCreated() != 2 || ex.ran.Load() != 0 {
		t.Errorf("%d provider batches, %d gateway lines; want 2 and 0", fake.BatchesCreated(), ex.ran.Load())
	}
	// Each provider batch got one model and the marker in its metadata.
	creates := 0
	for _, rq := range fake.Requests() {
		if rq.Method == http.MethodPost && strings.HasSuffix(rq.Path, "/batches") {
			creates++
			if !strings.HasPrefix(gjson.GetBytes(rq.Body, "metadata.modelgate_marker").Str, "mg-") {
				t.Errorf("create without the marker: %s", rq.Body)
			}
		}
	}
	if creates != 2 {
		t.Errorf("%d create calls, want 2", creates)
	}
}

// crashSend passes requests to next until one matching method and path
// suffix has been answered by the provider; from then on it answers
// nothing, as a process killed at that moment would, until ctx ends.
// A request already on its way when that happens is carried to the end
// even when ctx ends: the provider acts on what it has received, and a
// restarted process comes long after. Cancelling it would let it reach
// the fake after the new runner has looked for it.
type crashSend struct {
	next         providers.Send
	method, path string
	crashed      atomic.Bool
	once         sync.Once
	at           chan struct{}
}

func (c *crashSend) send(ctx context.Context, req providers.Request) (providers.Answer, error) {
	if c.crashed.Load() {
		<-ctx.Done()
		return providers.Answer{}, ctx.Err()
	}
	ans, err := c.next(context.WithoutCancel(ctx), req)
	m := req.Method
	if m == "" {
		m = http.MethodPost
	}
	if err == nil && m == c.method && strings.HasSuffix(strings.SplitN(req.Path, "?", 2)[0], c.path) && c.crashed.CompareAndSwap(false, true) {
		_, _ = io.Copy(io.Discard, ans.Body)
		ans.Body.Close()
		c.once.Do(func() { close(c.at) })
		<-ctx.Done()
		return providers.Answer{}, ctx.Err()
	}
	return ans, err
}

// TestNativeOpenAICrash kills the runner as the provider answers each
// kind of request, restarts it, and checks that the provider got one
// batch and every line one result.
func TestNativeOpenAICrash(t *testing.T) {
	for _, step := range []struct{ method, path string }{
		{http.MethodPost, "/files"},
		{http.MethodPost, "/batches"},
		{http.MethodGet, "/batches/batch_1"},
		{http.MethodGet, "/content"},
	} {
		t.Run(step.method+" "+step.path, func(t *testing.T) {
			fake := providertest.Start(t, providertest.Options{OpenAIKey: "sk-test"})
			base := httpSend(fake.URL+"/v1", func(h http.Header) { h.Set("Authorization", "Bearer sk-test") })
			cs := &crashSend{next: base, method: step.method, path: step.path, at: make(chan struct{})}
			ex := &routeExecutor{}
			st := batch.NewStore(storagetest.NewMemory(), "mg")
			first := batch.NewRunner(st, "inst", 10*time.Millisecond, live(ex, map[string]batch.NativeAPI{"openai": openai.Batches{Send: cs.send}}))
			var lines []string
			for i := range 20 {
				lines = append(lines, chatLine(fmt.Sprintf("r-%d", i), "openai/gpt-4o-mini", ""))
			}
			ctx := context.Background()
			f, _ := st.PutFile(ctx, "o", "in.jsonl", batch.PurposeBatch, strings.NewReader(strings.Join(lines, "\n")+"\n"), 1<<30)
			b, err := st.CreateBatch(ctx, "o", batch.CreateParams{InputFileID: f.ID, Endpoint: batch.EndpointChat, CompletionWindow: "24h", Window: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-cs.at:
			case <-time.After(20 * time.Second):
				t.Fatal("the runner never got there")
			}
			_ = first.Destruct()

			second := batch.NewRunner(st, "inst", 10*time.Millisecond, live(ex, map[string]batch.NativeAPI{"openai": openai.Batches{Send: base}}))
			t.Cleanup(func() { _ = second.Destruct() })
			done := waitStatus(t, st, b.ID, batch.StatusCompleted)
			_, counts := results(t, st, done)
			if len(counts) != 20 {
				t.Errorf("%d custom_ids have results, want 20", len(counts))
			}
			for id, n := range counts {
				if n != 1 {
					t.Errorf("%s has %d result lines", id, n)
				}
			}
			if fake.BatchesCreated() != 1 {
				t.Errorf("the provider created %d batches, want 1", fake.BatchesCreated())
			}
		})
	}
}

// TestNativeOpenAICancelAndExpiry: a cancel reaches the provider batch
// and keeps what it finished; a provider batch that expires ends its
// unfinished lines as batch_expired.
func TestNativeOpenAICancelAndExpiry(t *testing.T) {
	for _, tc := range []struct {
		name, status, code string
	}{{"cancel", batch.StatusCancelled, "batch_cancelled"}, {"provider expiry", batch.StatusCompleted, "batch_expired"}} {
		t.Run(tc.name, func(t *testing.T) {
			fake := providertest.Start(t, providertest.Options{OpenAIKey: "sk-test"})
			fake.HoldBatches(true)
			oa := openai.Batches{Send: httpSend(fake.URL+"/v1", func(h http.Header) { h.Set("Authorization", "Bearer sk-test") })}
			st := batch.NewStore(storagetest.NewMemory(), "mg")
			r := batch.NewRunner(st, "inst", 10*time.Millisecond, live(&routeExecutor{}, map[string]batch.NativeAPI{"openai": oa}))
			t.Cleanup(func() { _ = r.Destruct() })
			var lines []string
			for i := range 10 {
				lines = append(lines, chatLine(fmt.Sprintf("r-%d", i), "openai/gpt-4o-mini", ""))
			}
			ctx := context.Background()
			f, _ := st.PutFile(ctx, "o", "in.jsonl", batch.PurposeBatch, strings.NewReader(strings.Join(lines, "\n")+"\n"), 1<<30)
			b, _ := st.CreateBatch(ctx, "o", batch.CreateParams{InputFileID: f.ID, Endpoint: batch.EndpointChat, CompletionWindow: "24h", Window: time.Hour})
			for deadline := time.Now().Add(10 * time.Second); fake.BatchesCreated() == 0; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no provider batch")
				}
			}
			if tc.name == "cancel" {
				if _, err := st.CancelBatch(ctx, "o", b.ID); err != nil {
					t.Fatal(err)
				}
			} else {
				fake.ExpireBatches()
			}
			done := waitStatus(t, st, b.ID, tc.status)
			got, counts := results(t, st, done)
			if len(counts) != 10 {
				t.Fatalf("%d custom_ids have results", len(counts))
			}
			answered := 0
			for _, l := range got {
				if l.Get("response.status_code").Int() == 200 {
					answered++
				} else if l.Get("error.code").Str != tc.code {
					t.Errorf("%s", l.Raw)
				}
			}
			if answered != 5 {
				t.Errorf("%d lines answered before the end, want 5", answered)
			}
			cancels := 0
			for _, rq := range fake.Requests() {
				if strings.HasSuffix(rq.Path, "/cancel") {
					cancels++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.name == "cancel"]; cancels != want {
				t.Errorf("%d cancels sent to the provider, want %d", cancels, want)
			}
		})
	}
}

// TestNativeAnthropicBatches runs chat lines through Anthropic's Message
// Batches API (the fake): translated as live requests are, answered as
// chat.completions, a model whose requests fail ending in the error
// file, and a crash right after the create call finding the batch again.
func TestNativeAnthropicBatches(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(map[bool]string{false: "run", true: "crash after create"}[crash], func(t *testing.T) {
			fake := providertest.Start(t, providertest.Options{AnthropicKey: "an-key"})
			base := httpSend(fake.URL, func(h http.Header) { h.Set("X-Api-Key", "an-key") })
			cs := &crashSend{next: base, method: http.MethodPost, path: "/v1/messages/batches", at: make(chan struct{})}
			send := base
			if crash {
				send = cs.send
			}
			ex := &routeExecutor{}
			st := batch.NewStore(storagetest.NewMemory(), "mg")
			r := batch.NewRunner(st, "inst", 10*time.Millisecond, live(ex, map[string]batch.NativeAPI{"anthropic": anthropic.Batches{Send: send}}))
			var lines []string
			for i := range 8 {
				lines = append(lines, chatLine(fmt.Sprintf("c-%d", i), "anthropic/claude-sonnet-4-5", ""))
			}
			lines = append(lines, chatLine("f-0", "anthropic/x-fail-500", ""), chatLine("f-1", "anthropic/x-fail-500", ""))
			ctx := context.Background()
			f, _ := st.PutFile(ctx, "o", "in.jsonl", batch.PurposeBatch, strings.NewReader(strings.Join(lines, "\n")+"\n"), 1<<30)
			b, err := st.CreateBatch(ctx, "o", batch.CreateParams{InputFileID: f.ID, Endpoint: batch.EndpointChat, CompletionWindow: "24h", Window: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if crash {
				<-cs.at
				_ = r.Destruct()
				r = batch.NewRunner(st, "inst", 10*time.Millisecond, live(ex, map[string]batch.NativeAPI{"anthropic": anthropic.Batches{Send: base}}))
			}
			t.Cleanup(func() { _ = r.Destruct() })
			done := waitStatus(t, st, b.ID, batch.StatusCompleted)
			got, counts := results(t, st, done)
			if len(counts) != 10 {
				t.Fatalf("%d custom_ids have results, want 10", len(counts))
			}
			for i := range 8 {
				l := got[fmt.Sprintf("c-%d", i)]
				if l.Get("response.status_code").Int() != 200 || l.Get("response.body.object").Str != "chat.completion" ||
					l.Get("response.body.choices.0.message.content").Str != fmt.Sprintf("echo: say c-%d", i) || l.Get("response.body.usage.total_tokens").Int() == 0 {
					t.Errorf("c-%d: %s", i, l.Raw)
				}
			}
			for _, id := range []string{"f-0", "f-1"} {
				if l := got[id]; l.Get("response.status_code").Int() != 500 || l.Get("response.body.error.type").Str == "" {
					t.Errorf("%s: %s", id, l.Raw)
				}
			}
			if n := fake.AnthropicBatchesCreated(); n != 2 || ex.ran.Load() != 0 {
				t.Errorf("%d message batches, %d gateway lines; want 2 (one per model) and 0", n, ex.ran.Load())
			}
		})
	}
}

// TestNativeAnthropicFind: the Message Batches API keeps no metadata, so
// Find tells a part's batch by its time and size. The part's tagged
// custom_ids keep a batch of the same size from being taken for it, and
// another batch's results from answering its requests; of two running
// batches that could be it, neither is taken.
func TestNativeAnthropicFind(t *testing.T) {
	ctx := context.Background()
	fake := providertest.Start(t, providertest.Options{AnthropicKey: "an-key"})
	api := anthropic.Batches{Send: httpSend(fake.URL, func(h http.Header) { h.Set("X-Api-Key", "an-key") })}
	sub := func(marker string) *batch.NativeSubmission {
		var recs []byte
		for j := range 2 {
			r, err := api.Encode(batch.EndpointChat, fmt.Sprint(j), []byte(fmt.Sprintf(`{"model":"anthropic/claude-sonnet-4-5","messages":[{"role":"user","content":"say %s %d"}]}`, marker, j)), "claude-sonnet-4-5")
			if err != nil {
				t.Fatal(err)
			}
			recs = append(append(recs, r...), '\n')
		}
		return &batch.NativeSubmission{Marker: marker, Endpoint: batch.EndpointChat, Model: "claude-sonnet-4-5", Count: 2, Bytes: int64(len(recs)),
			Since: time.Now(), Records: func() io.ReadCloser { return io.NopCloser(bytes.NewReader(recs)) }}
	}
	// answers are the contents of ref's results, by key, read as the part
	// marked marker.
	answers := func(ref batch.NativeRef, marker string) map[string]string {
		t.Helper()
		st, err := api.Poll(ctx, ref) // the fake ends a batch when it is read
		if err != nil || st.State != batch.NativeCompleted {
			t.Fatalf("poll: %+v %v", st, err)
		}
		got := map[string]string{}
		ref.Data = map[string]string{"marker": marker}
		err = api.Results(ctx, ref, st, func(r batch.NativeResult) error {
			got[r.Key] = gjson.GetBytes(r.Body, "choices.0.message.content").Str
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	find := func(s *batch.NativeSubmission) (string, bool) {
		t.Helper()
		ref, found, err := api.Find(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		return ref.ID, found
	}
	mine, other := sub("mg-mine"), sub("mg-other")

	otherRef, err := api.Submit(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if got := answers(otherRef, "mg-mine"); len(got) != 0 {
		t.Errorf("another part's batch answered this one's requests: %v", got)
	}
	if got := answers(otherRef, "mg-other"); len(got) != 2 || got["0"] != "echo: say mg-other 0" || got["1"] != "echo: say mg-other 1" {
		t.Errorf("the part's own results: %v", got)
	}
	if id, found := find(mine); found {
		t.Errorf("Find took %s, another part's ended batch of the same size", id)
	}

	ref, err := api.Submit(ctx, mine)
	if err != nil {
		t.Fatal(err)
	}
	if id, found := find(mine); !found || id != ref.ID {
		t.Errorf("Find of the running batch: %q %v, want %q", id, found, ref.ID)
	}
	third, err := api.Submit(ctx, sub("mg-third"))
	if err != nil {
		t.Fatal(err)
	}
	if id, found := find(mine); found {
		t.Errorf("Find took %s of two running batches of the same size", id)
	}
	if got := answers(ref, "mg-mine"); got["0"] != "echo: say mg-mine 0" || got["1"] != "echo: say mg-mine 1" {
		t.Errorf("the part's own results: %v", got)
	}
	if id, found := find(mine); !found || id != ref.ID {
		t.Errorf("Find once the part's batch ended (beside %s, running): %q %v, want %q", third.ID, id, found, ref.ID)
	}
}

// TestNativeGeminiBatches runs chat lines through the Gemini batch mode
// (the fake, inline requests): answers back as chat.completions, a line
// the provider refuses as an inline error in the error file, a crash
// right after the create call finding the batch again by its display
// name, and a provider expiry's unfinished lines as batch_expired.
func TestNativeGeminiBatches(t *testing.T) {
	for _, tc := range []string{"run", "crash after create", "provider expiry"} {
		t.Run(tc, func(t *testing.T) {
			fake := providertest.Start(t, providertest.Options{Keys: map[string]string{"gemini_batch": "g-key", "gemini": "g-key"}})
			base := httpSend(fake.URL+"/v1beta", func(h http.Header) { h.Set("X-Goog-Api-Key", "g-key") })
			cs := &crashSend{next: base, method: http.MethodPost, path: ":batchGenerateContent", at: make(chan struct{})}
			send := base
			if tc == "crash after create" {
				send = cs.send
			}
			if tc == "provider expiry" {
				fake.HoldBatches(true)
			}
			ex := &routeExecutor{}
			st := batch.NewStore(storagetest.NewMemory(), "mg")
			r := batch.NewRunner(st, "inst", 10*time.Millisecond, live(ex, map[string]batch.NativeAPI{"gemini": gemini.Batches{Send: send}}))
			var lines []string
			for i := range 8 {
				extra := ""
				if i == 3 {
					extra = `,"temperature":5` // the provider refuses this one
				}
				lines = append(lines, chatLine(fmt.Sprintf("g-%d", i), "gemini/gemini-2.5-flash", extra))
			}
			ctx := context.Background()
			f, _ := st.PutFile(ctx, "o", "in.jsonl", batch.PurposeBatch, strings.NewReader(strings.Join(lines, "\n")+"\n"), 1<<30)
			b, err := st.CreateBatch(ctx, "o", batch.CreateParams{InputFileID: f.ID, Endpoint: batch.EndpointChat, CompletionWindow: "24h", Window: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			switch tc {
			case "crash after create":
				<-cs.at
				_ = r.Destruct()
				r = batch.NewRunner(st, "inst", 10*time.Millisecond, live(ex, map[string]batch.NativeAPI{"gemini": gemini.Batches{Send: base}}))
			case "provider expiry":
				for deadline := time.Now().Add(10 * time.Second); fake.GeminiBatchesCreated() == 0; time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("no provider batch")
					}
				}
				fake.ExpireBatches()
			}
			t.Cleanup(func() { _ = r.Destruct() })
			done := waitStatus(t, st, b.ID, batch.StatusCompleted)
			got, counts := results(t, st, done)
			if len(counts) != 8 {
				t.Fatalf("%d custom_ids have results, want 8", len(counts))
			}
			for i := range 8 {
				l := got[fmt.Sprintf("g-%d", i)]
				switch {
				case tc == "provider expiry" && i >= 4:
					if l.Get("error.code").Str != "batch_expired" {
						t.Errorf("g-%d: %s", i, l.Raw)
					}
				case i == 3:
					if l.Get("response.status_code").Int() != 400 || l.Get("response.body.error.message").Str == "" {
						t.Errorf("g-3: %s, want the provider's 400", l.Raw)
					}
				case l.Get("response.status_code").Int() != 200 || l.Get("response.body.object").Str != "chat.completion" ||
					!strings.Contains(l.Get("response.body.choices.0.message.content").Str, fmt.Sprintf("say g-%d", i)):
					t.Errorf("g-%d: %s", i, l.Raw)
				}
			}
			if n := fake.GeminiBatchesCreated(); n != 1 || ex.ran.Load() != 0 {
				t.Errorf("%d provider batches, %d gateway lines; want 1 and 0", n, ex.ran.Load())
			}
		})
	}
}
