package keyadmin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/usage"
)

// testNow is the clock of these tests: 2026-07-24 in UTC.
var testNow = time.Date(2026, 7, 24, 15, 4, 5, 0, time.UTC)

func day(t *testing.T, s string) usage.Day {
	t.Helper()
	d, err := usage.ParseDay(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestParseUsageParams(t *testing.T) {
	for _, tc := range []struct {
		name, query string
		from, to    string
		by          []usage.Dimension
		key, owner  string
		err         string // what the 400's message holds
	}{
		{name: "defaults: this month so far", from: "2026-07-01", to: "2026-07-24"},
		{name: "a range", query: "from=2026-06-01&to=2026-06-30", from: "2026-06-01", to: "2026-06-30"},
		{name: "one day", query: "from=2026-07-02&to=2026-07-02", from: "2026-07-02", to: "2026-07-02"},
		{name: "from only", query: "from=2026-05-10", from: "2026-05-10", to: "2026-07-24"},
		{name: "to only", query: "to=2026-07-10", from: "2026-07-01", to: "2026-07-10"},
		{name: "to in the future", query: "to=2026-12-31", from: "2026-07-01", to: "2026-12-31"},
		{name: "grouped", query: "group_by=key,model,provider,day,owner", from: "2026-07-01", to: "2026-07-24",
			by: []usage.Dimension{usage.ByKey, usage.ByModel, usage.ByProvider, usage.ByDay, usage.ByOwner}},
		{name: "grouped with spaces and twice", query: "group_by=" + url.QueryEscape(" day, key,day"), from: "2026-07-01", to: "2026-07-24",
			by: []usage.Dimension{usage.ByDay, usage.ByKey}},
		{name: "filters", query: "key_id=static:k-free&owner=team-a", from: "2026-07-01", to: "2026-07-24", key: "static:k-free", owner: "team-a"},

		{name: "a bad from", query: "from=2026-13-01", err: "invalid query parameter from"},
		{name: "a time, not a day", query: "from=2026-07-01T00:00:00Z", err: "invalid query parameter from"},
		{name: "a bad to", query: "to=yesterday", err: "invalid query parameter to"},
		{name: "to before from", query: "from=2026-07-10&to=2026-07-09", err: "invalid query parameter to: 2026-07-09 is before from 2026-07-10"},
		{name: "the default to before from", query: "from=2026-08-01", err: "invalid query parameter to"},
		{name: "an unknown dimension", query: "group_by=key,team", err: `invalid query parameter group_by: cannot group usage by "team"`},
		{name: "an empty dimension", query: "group_by=key,", err: "invalid query parameter group_by"},
		{name: "an unknown parameter", query: "groupby=key", err: `unknown query parameter "groupby"`},
		{name: "a parameter twice", query: "from=2026-07-01&from=2026-07-02", err: "invalid query parameter from: given 2 times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			p, err := parseUsageParams(q, testNow)
			if tc.err != "" {
				rec := httptest.NewRecorder()
				var msg struct{ Error string }
				if werr := writeAPIError(rec, err); werr != nil || rec.Code != 400 ||
					json.Unmarshal(rec.Body.Bytes(), &msg) != nil || !strings.Contains(msg.Error, tc.err) {
					t.Fatalf("got %d %s (%v); want 400 saying %q", rec.Code, rec.Body, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := usageParams{from: day(t, tc.from), to: day(t, tc.to), by: tc.by, keyID: tc.key, owner: tc.owner}
			if !reflect.DeepEqual(p, want) {
				t.Fatalf("got %+v, want %+v", p, want)
			}
			// The query covers the days from and to, both included.
			uq := p.query()
			if !uq.From.Equal(want.from.Time()) || !uq.To.Equal(want.to.Time().AddDate(0, 0, 1)) {
				t.Errorf("query range %v to %v", uq.From, uq.To)
			}
		})
	}
}

// fakeApp is the modelgate app as the API sees it: real usage records on
// a memory storage, a status and policies set by the test.
type fakeApp struct {
	rec       *usage.Recorder
	usageErr  error
	status    quota.Status
	statusErr error
	keyPolicy keys.Policy
	ownPolicy keys.Policy

	mu         sync.Mutex
	queries    []usage.Query
	policyKeys []keys.Key // the keys EffectivePolicy was asked about
}

func (f *fakeApp) Usage(ctx context.Context, q usage.Query) (usage.Report, error) {
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.mu.Unlock()
	if f.usageErr != nil {
		return usage.Report{}, f.usageErr
	}
	return f.rec.Query(ctx, q)
}

func (f *fakeApp) KeyStatus(context.Context, keys.Key) (quota.Status, error) {
	return f.status, f.statusErr
}

func (f *fakeApp) EffectivePolicy(k keys.Key) (keys.Policy, keys.Policy) {
	f.mu.Lock()
	f.policyKeys = append(f.policyKeys, k)
	f.mu.Unlock()
	return f.keyPolicy, f.ownPolicy
}

func (f *fakeApp) ListAccountFiles(context.Context, string, batch.ListOptions) (batch.Page[batch.File], error) {
	return batch.Page[batch.File]{}, nil
}

func (f *fakeApp) ListAccountBatches(context.Context, string, batch.ListOptions) (batch.Page[batch.Batch], error) {
	return batch.Page[batch.Batch]{}, nil
}

func (f *fakeApp) lastQuery(t *testing.T) usage.Query {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queries) == 0 {
		t.Fatal("no usage query")
	}
	return f.queries[len(f.queries)-1]
}

// usageFixture is an API with one managed key and usage of it and of a
// static key.
type usageFixture struct {
	api keyAPI
	app *fakeApp
	key keys.Key
}

func newUsageFixture(t *testing.T) *usageFixture {
	t.Helper()
	st := storagetest.NewMemory()
	km := keys.NewManager(st, "modelgate")
	km.Now = func() time.Time { return testNow }
	k, _, err := km.Create(context.Background(), keys.NewKey{Name: "ci", Owner: "team-a",
		Limits: &keys.Limits{RequestsPerMinute: 100}, Budget: &keys.Budget{USD: "1", Period: "month"}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := usage.New(st, usage.Options{Instance: "test"})
	if err != nil {
		t.Fatal(err)
	}
	add := func(b usage.Bucket, d string, c usage.Counts) {
		b.Day = day(t, d)
		rec.Add(b, c)
	}
	ci := usage.Bucket{KeyID: k.ID, KeyName: "ci", Owner: "team-a"}
	free := usage.Bucket{KeyID: "static:k-free", KeyName: "k-free", Owner: "k-free"}
	oa := func(b usage.Bucket, model string) usage.Bucket {
		b.Model, b.Provider, b.ProviderType = model, "oa", "openai"
		return b
	}
	add(oa(ci, "gpt-4o"), "2026-07-24", usage.Counts{Requests: 2, InputTokens: 100, CachedTokens: 20, OutputTokens: 50, ReasoningTokens: 8, Cost: 450 * pricing.Microdollar})
	add(oa(ci, "gpt-4o"), "2026-07-22", usage.Counts{Requests: 1, InputTokens: 10, OutputTokens: 5, Cost: 75 * pricing.Microdollar})
	claude := ci
	claude.Model, claude.Provider, claude.ProviderType = "claude/my-finetune", "claude", "anthropic"
	add(claude, "2026-07-23", usage.Counts{Requests: 1, InputTokens: 10, OutputTokens: 5, Unpriced: 1})
	add(oa(free, "text-embedding-3-small"), "2026-07-01", usage.Counts{Requests: 3, EmbeddingTokens: 300, Cost: 6 * pricing.Microdollar})
	add(oa(ci, "gpt-4o"), "2026-06-30", usage.Counts{Requests: 1, InputTokens: 1, OutputTokens: 1, Cost: pricing.Dollar})
	// Half of it flushed to the storage, half pending: a query sums both.
	if err := rec.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	add(oa(ci, "gpt-4o"), "2026-07-24", usage.Counts{Requests: 1, InputTokens: 30, OutputTokens: 10, Cost: 175 * pricing.Microdollar})

	app := &fakeApp{rec: rec, keyPolicy: keys.Policy{Limits: k.Limits, Budget: k.Budget},
		ownPolicy: keys.Policy{Limits: &keys.Limits{TokensPerMinute: 50000}}}
	api := keyAPI{svc: testService(st, km), app: app, logger: zap.NewNop(), actor: accounts.Operator("test", ""), now: func() time.Time { return testNow }}
	return &usageFixture{api: api, app: app, key: k}
}

// do sends one request to the API as its hosts do and returns the status,
// the body and the headers.
func (f *usageFixture) do(t *testing.T, method, target string) (int, string, http.Header) {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	w := httptest.NewRecorder()
	p, ok := parseAPIPath(strings.TrimPrefix(r.URL.Path, "/"))
	if !ok {
		t.Fatalf("%s is not an API path", target)
	}
	if err := writeAPIError(w, f.api.serve(w, r, p)); err != nil {
		t.Fatal(err)
	}
	return w.Code, w.Body.String(), w.Header()
}

// sameJSON fails unless got and want are the same JSON value.
func sameJSON(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("the test's JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		var buf bytes.Buffer
		_ = json.Indent(&buf, []byte(got), "", "  ")
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestUsageAPI(t *testing.T) {
	f := newUsageFixture(t)
	id := f.key.ID
	counts := func(req, in, cached, out, reasoning, emb int64, cost string, unpriced int64) string {
		b, _ := json.Marshal(usageCounts{Requests: req, InputTokens: in, CachedTokens: cached, OutputTokens: out,
			ReasoningTokens: reasoning, EmbeddingTokens: emb, CostUSD: cost, Unpriced: unpriced})
		return strings.Trim(string(b), "{}")
	}
	total := counts(8, 150, 20, 70, 8, 300, "0.000706", 1)
	for _, tc := range []struct {
		name, target string
		want         string
		query        usage.Query
	}{
		{
			name:   "by key and model",
			target: "/usage?group_by=key,model&from=2026-07-01&to=2026-07-24",
			want: `{"from":"2026-07-01","to":"2026-07-24","group_by":["key","model"],"rows":[
				{"key_id":"` + id + `","key_name":"ci","model":"claude/my-finetune",` + counts(1, 10, 0, 5, 0, 0, "0", 1) + `},
				{"key_id":"` + id + `","key_name":"ci","model":"gpt-4o",` + counts(4, 140, 20, 65, 8, 0, "0.0007", 0) + `},
				{"key_id":"static:k-free","key_name":"k-free","model":"text-embedding-3-small",` + counts(3, 0, 0, 0, 0, 300, "0.000006", 0) + `}],
				"total":{` + total + `}}`,
			query: usage.Query{From: day(t, "2026-07-01").Time(), To: day(t, "2026-07-25").Time(), By: []usage.Dimension{usage.ByKey, usage.ByModel}},
		},
		{
			name:   "by default the month so far, in one row",
			target: "/usage",
			want:   `{"from":"2026-07-01","to":"2026-07-24","group_by":[],"rows":[{` + total + `}],"total":{` + total + `}}`,
			query:  usage.Query{From: day(t, "2026-07-01").Time(), To: day(t, "2026-07-25").Time()},
		},
		{
			name:   "by day, provider and owner, of one owner",
			target: "/usage?group_by=day,provider,owner&owner=team-a&from=2026-06-30&to=2026-07-23",
			want: `{"from":"2026-06-30","to":"2026-07-23","group_by":["day","provider","owner"],"rows":[
				{"day":"2026-06-30","owner":"team-a","provider":"oa","provider_type":"openai",` + counts(1, 1, 0, 1, 0, 0, "1", 0) + `},
				{"day":"2026-07-22","owner":"team-a","provider":"oa","provider_type":"openai",` + counts(1, 10, 0, 5, 0, 0, "0.000075", 0) + `},
				{"day":"2026-07-23","owner":"team-a","provider":"claude","provider_type":"anthropic",` + counts(1, 10, 0, 5, 0, 0, "0", 1) + `}],
				"total":{` + counts(3, 21, 0, 11, 0, 0, "1.000075", 1) + `}}`,
			query: usage.Query{From: day(t, "2026-06-30").Time(), To: day(t, "2026-07-24").Time(),
				By: []usage.Dimension{usage.ByDay, usage.ByProvider, usage.ByOwner}, Owner: "team-a"},
		},
		{
			name:   "of one key, nothing in the range",
			target: "/usage?key_id=static:k-free&from=2026-07-02&group_by=key",
			want:   `{"from":"2026-07-02","to":"2026-07-24","group_by":["key"],"rows":[],"total":{` + counts(0, 0, 0, 0, 0, 0, "0", 0) + `}}`,
			query: usage.Query{From: day(t, "2026-07-02").Time(), To: day(t, "2026-07-25").Time(),
				By: []usage.Dimension{usage.ByKey}, KeyID: "static:k-free"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, hdr := f.do(t, http.MethodGet, tc.target)
			if status != 200 || hdr.Get("Content-Type") != "application/json" || hdr.Get("Cache-Control") != "no-store" {
				t.Fatalf("%d %v %s", status, hdr, body)
			}
			sameJSON(t, body, tc.want)
			if q := f.app.lastQuery(t); !reflect.DeepEqual(q, tc.query) {
				t.Errorf("query %+v, want %+v", q, tc.query)
			}
		})
	}

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			name, method, target string
			status               int
			err                  string
		}{
			{"a bad parameter", "GET", "/usage?from=07/01/2026", 400, "invalid query parameter from"},
			{"a bad grouping", "GET", "/usage?group_by=team", 400, "invalid query parameter group_by"},
			{"a POST", "POST", "/usage", 405, "method not allowed"},
		} {
			status, body, hdr := f.do(t, tc.method, tc.target)
			if status != tc.status || !strings.Contains(body, `"error":"`+tc.err) {
				t.Errorf("%s: %d %s", tc.name, status, body)
			}
			if status == 405 && hdr.Get("Allow") != "GET" {
				t.Errorf("%s: Allow %q", tc.name, hdr.Get("Allow"))
			}
		}
		f.app.usageErr = errors.New("the disk is on fire")
		defer func() { f.app.usageErr = nil }()
		status, body, _ := f.do(t, "GET", "/usage")
		sameJSON(t, body, `{"error":"the usage records could not be read from the storage"}`)
		if status != 500 {
			t.Errorf("a storage failure: %d", status)
		}
	})
}

func TestKeyUsageAPI(t *testing.T) {
	f := newUsageFixture(t)
	id := f.key.ID
	resets := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	f.app.status = quota.Status{
		Key: quota.SubjectStatus{
			Requests: quota.RateLimit{Limit: 100, Remaining: 97, Reset: 1500 * time.Millisecond},
			Budget: quota.BudgetStatus{Budget: quota.Budget{Amount: pricing.Dollar, Period: quota.Month},
				Spent: 625 * pricing.Microdollar, Reserved: 30 * pricing.Microdollar, Left: pricing.Dollar - 655*pricing.Microdollar, Resets: resets},
		},
		Owner: quota.SubjectStatus{Tokens: quota.RateLimit{Limit: 50000, Remaining: 49000, Reset: time.Minute}},
	}
	keyJSON, err := json.Marshal(f.key)
	if err != nil {
		t.Fatal(err)
	}
	zero := `"requests":0,"input_tokens":0,"cached_tokens":0,"cache_write_tokens":0,"output_tokens":0,"reasoning_tokens":0,"rerank_searches":0,"embedding_tokens":0,"cache_hits":0,"cost_usd":"0","unpriced_requests":0`
	status, body, _ := f.do(t, http.MethodGet, "/keys/"+id+"/usage?days=4")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	sameJSON(t, body, `{"key":`+string(keyJSON)+`,"from":"2026-07-21","to":"2026-07-24","days":[
		{"day":"2026-07-21",`+zero+`},
		{"day":"2026-07-22","requests":1,"input_tokens":10,"cached_tokens":0,"cache_write_tokens":0,"output_tokens":5,"reasoning_tokens":0,"rerank_searches":0,"embedding_tokens":0,"cache_hits":0,"cost_usd":"0.000075","unpriced_requests":0},
		{"day":"2026-07-23","requests":1,"input_tokens":10,"cached_tokens":0,"cache_write_tokens":0,"output_tokens":5,"reasoning_tokens":0,"rerank_searches":0,"embedding_tokens":0,"cache_hits":0,"cost_usd":"0","unpriced_requests":1},
		{"day":"2026-07-24","requests":3,"input_tokens":130,"cached_tokens":20,"cache_write_tokens":0,"output_tokens":60,"reasoning_tokens":8,"rerank_searches":0,"embedding_tokens":0,"cache_hits":0,"cost_usd":"0.000625","unpriced_requests":0}],
		"total":{"requests":5,"input_tokens":150,"cached_tokens":20,"cache_write_tokens":0,"output_tokens":70,"reasoning_tokens":8,"rerank_searches":0,"embedding_tokens":0,"cache_hits":0,"cost_usd":"0.0007","unpriced_requests":1},
		"policy":{"key":{"limits":{"requests_per_minute":100},"budget":{"usd":"1","period":"month"}},"owner":{"limits":{"tokens_per_minute":50000}}},
		"status":{"key":{"requests_per_minute":{"limit":100,"remaining":97,"reset_ms":1500},
			"budget":{"usd":"1","period":"month","spent_usd":"0.000625","reserved_usd":"0.00003","left_usd":"0.999345","resets_at":`+itoa(resets.Unix())+`}},
			"owner":{"tokens_per_minute":{"limit":50000,"remaining":49000,"reset_ms":60000}}}}`)
	q := f.app.lastQuery(t)
	if want := (usage.Query{From: day(t, "2026-07-21").Time(), To: day(t, "2026-07-25").Time(), By: []usage.Dimension{usage.ByDay}, KeyID: id}); !reflect.DeepEqual(q, want) {
		t.Errorf("query %+v, want %+v", q, want)
	}

	// 30 days by default; a total budget never resets.
	f.app.status = quota.Status{Key: quota.SubjectStatus{Budget: quota.BudgetStatus{Budget: quota.Budget{Amount: 5 * pricing.Dollar, Period: quota.Total},
		Spent: 5 * pricing.Dollar}}}
	status, body, _ = f.do(t, http.MethodGet, "/keys/"+id+"/usage")
	var ku struct {
		From, To string
		Days     []struct{ Day string }
		Status   json.RawMessage
	}
	if err := json.Unmarshal([]byte(body), &ku); status != 200 || err != nil {
		t.Fatalf("%d %s %v", status, body, err)
	}
	if len(ku.Days) != 30 || ku.From != "2026-06-25" || ku.Days[0].Day != "2026-06-25" || ku.Days[29].Day != "2026-07-24" || ku.To != "2026-07-24" {
		t.Errorf("30 days: %s", body)
	}
	sameJSON(t, string(ku.Status), `{"key":{"budget":{"usd":"5","period":"total","spent_usd":"5","reserved_usd":"0","left_usd":"0","resets_at":null}},"owner":{}}`)

	// Where the key stands cannot be read: the usage is still shown.
	f.app.statusErr = errors.New("redis: connection refused")
	status, body, _ = f.do(t, http.MethodGet, "/keys/"+id+"/usage?days=1")
	if status != 200 || strings.Contains(body, `"status":`) || !strings.Contains(body, `"status_error":"where the key stands`) ||
		strings.Contains(body, "redis") || !strings.Contains(body, `"days":[{"day":"2026-07-24"`) {
		t.Errorf("without a status: %d %s", status, body)
	}

	for _, tc := range []struct {
		name, method, target string
		status               int
		err                  string
	}{
		{"no days", "GET", "/keys/" + id + "/usage?days=0", 400, "invalid query parameter days"},
		{"too many days", "GET", "/keys/" + id + "/usage?days=367", 400, "invalid query parameter days"},
		{"not a number", "GET", "/keys/" + id + "/usage?days=month", 400, "invalid query parameter days"},
		{"another parameter", "GET", "/keys/" + id + "/usage?from=2026-07-01", 400, `unknown query parameter \"from\"`},
		{"an unknown key", "GET", "/keys/key_00000000000000000000000000/usage", 404, "no key with id"},
		{"a DELETE", "DELETE", "/keys/" + id + "/usage", 405, "method not allowed"},
	} {
		status, body, _ := f.do(t, tc.method, tc.target)
		if status != tc.status || !strings.Contains(body, `"error":"`+tc.err) {
			t.Errorf("%s: %d %s", tc.name, status, body)
		}
	}
}

func itoa(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}
