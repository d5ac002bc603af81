package providertest

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// anthropicBatchFormat is Anthropic's Message Batches API: POST
// /v1/messages/batches with the requests inline
// ({"requests":[{"custom_id","params"}]}), GET /v1/messages/batches (paged,
// newest first), GET /v1/messages/batches/{id}, POST …/cancel and GET
// …/results (JSONL, result.type succeeded, errored, canceled or expired).
// custom_ids are checked against ^[a-zA-Z0-9_-]{1,64}$ and for uniqueness,
// params as a non-streaming Messages request; each request is answered as the
// fake answers it on /v1/messages (an invalid one is an errored result).
// Counts stay at processing until the batch ends, as HoldBatches and
// ExpireBatches decide, as for OpenAI's batches; results come in reverse
// order.
type anthropicBatchFormat struct{}

func (anthropicBatchFormat) name() string { return "anthropic_batch" }

const anBatches = "/v1/messages/batches"

func (anthropicBatchFormat) route(r *http.Request) routing {
	p := r.URL.Path
	rest, ok := strings.CutPrefix(p, anBatches)
	if !ok {
		return notMine
	}
	id, tail, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	switch {
	case rest == "" && (r.Method == http.MethodPost || r.Method == http.MethodGet),
		id != "" && tail == "" && r.Method == http.MethodGet,
		id != "" && tail == "cancel" && r.Method == http.MethodPost,
		id != "" && tail == "results" && r.Method == http.MethodGet:
		return served
	}
	return owned
}

func (anthropicBatchFormat) headers(h http.Header, id string) { h.Set("Request-Id", "req_"+id) }

func (anthropicBatchFormat) authorized(r *http.Request, want string) bool {
	return keyOK(r.Header.Get("X-Api-Key"), want)
}

func (anthropicBatchFormat) model(*http.Request, []byte) string { return "" }

func (anthropicBatchFormat) fail(w http.ResponseWriter, r *http.Request, f fault) {
	anthropicFormat{}.fail(w, r, f)
}

// maxBody is Anthropic's limit for a batch: 256 MB.
func (anthropicBatchFormat) maxBody() int64 { return 256 << 20 }

var anCustomID = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// anBatch is a message batch of the fake.
type anBatch struct {
	id        string
	created   time.Time
	requests  []gjson.Result
	header    http.Header
	status    string // in_progress, canceling, ended
	cancelled bool
	results   []byte
	counts    map[string]int
}

type anBatchStore struct {
	mu      sync.Mutex
	batches map[string]*anBatch
	order   []string
}

func (s *Server) anthropicBatches() *anBatchStore {
	s.anOnce.Do(func() { s.anBatchAPI = &anBatchStore{batches: map[string]*anBatch{}} })
	return s.anBatchAPI
}

func (f anthropicBatchFormat) serve(c *call) {
	if v := c.r.Header.Get("Anthropic-Version"); !validAnthropicVersion(v) {
		anthropicError(c.w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	st := c.s.anthropicBatches()
	rest := strings.TrimPrefix(strings.TrimPrefix(c.r.URL.Path, anBatches), "/")
	id, tail, _ := strings.Cut(rest, "/")
	switch {
	case id == "" && c.r.Method == http.MethodPost:
		f.create(c, st)
	case id == "":
		f.list(c, st)
	default:
		st.mu.Lock()
		defer st.mu.Unlock()
		b := st.batches[id]
		if b == nil {
			anthropicError(c.w, http.StatusNotFound, "not_found_error", "no batch "+id)
			return
		}
		switch tail {
		case "cancel":
			if b.status == "in_progress" {
				b.status, b.cancelled = "canceling", true
			}
		case "results":
			if b.status != "ended" {
				anthropicError(c.w, http.StatusBadRequest, "invalid_request_error", "the batch has not ended")
				return
			}
			c.w.Header().Set("Content-Type", "application/binary")
			c.w.WriteHeader(http.StatusOK)
			_, _ = c.w.Write(b.results)
			return
		default:
			c.s.batchHoldMu.Lock()
			hold := c.s.batchHold
			c.s.batchHoldMu.Unlock()
			switch {
			case b.status == "canceling":
				c.s.endAnthropicBatch(b, "canceled")
			case b.status == "in_progress" && !hold:
				c.s.endAnthropicBatch(b, "")
			}
		}
		writeJSON(c.w, http.StatusOK, b.object())
	}
}

func (f anthropicBatchFormat) create(c *call, st *anBatchStore) {
	reqs := gjson.GetBytes(c.body, "requests")
	if !gjson.ValidBytes(c.body) || !reqs.IsArray() || len(reqs.Array()) == 0 {
		anthropicError(c.w, http.StatusBadRequest, "invalid_request_error", "requests: a non-empty array is required")
		return
	}
	seen := map[string]bool{}
	b := &anBatch{created: time.Now().UTC(), status: "in_progress",
		header: http.Header{"X-Api-Key": c.r.Header["X-Api-Key"], "Anthropic-Version": c.r.Header["Anthropic-Version"]}}
	for i, r := range reqs.Array() {
		id, params := r.Get("custom_id"), r.Get("params")
		switch {
		case !anCustomID.MatchString(id.Str) || seen[id.Str]:
			anthropicError(c.w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("requests.%d.custom_id: must match ^[a-zA-Z0-9_-]{1,64}$ and be unique", i))
			return
		case !params.IsObject() || params.Get("stream").Bool():
			anthropicError(c.w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("requests.%d.params: a non-streaming Messages request is required", i))
			return
		}
		seen[id.Str] = true
		b.requests = append(b.requests, r)
	}
	st.mu.Lock()
	b.id = "msgbatch_" + strconv.Itoa(len(st.order)+1)
	st.batches[b.id] = b
	st.order = append(st.order, b.id)
	// Rendered under the lock: once stored, the batch may be ended
	// (ExpireBatches, a cancel) by another goroutine.
	obj := b.object()
	st.mu.Unlock()
	writeJSON(c.w, http.StatusOK, obj)
}

func (f anthropicBatchFormat) list(c *call, st *anBatchStore) {
	limit, _ := strconv.Atoi(c.r.URL.Query().Get("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 20
	}
	after := c.r.URL.Query().Get("after_id")
	st.mu.Lock()
	defer st.mu.Unlock()
	var data [][]byte
	started, more := after == "", false
	for i := len(st.order) - 1; i >= 0; i-- {
		id := st.order[i]
		if !started {
			started = id == after
			continue
		}
		if len(data) == limit {
			more = true
			break
		}
		data = append(data, st.batches[id].object())
	}
	b := []byte(`{"data":[`)
	for i, d := range data {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, d...)
	}
	first, last := "null", "null"
	if len(data) > 0 {
		first, last = strconv.Quote(gjson.GetBytes(data[0], "id").Str), strconv.Quote(gjson.GetBytes(data[len(data)-1], "id").Str)
	}
	b = fmt.Appendf(b, `],"has_more":%t,"first_id":%s,"last_id":%s}`, more, first, last)
	writeJSON(c.w, http.StatusOK, b)
}

// endAnthropicBatch answers the batch's requests (all, or the first
// half when it is cancelled or expires: the rest are canceled or expired
// results), in reverse order.
func (s *Server) endAnthropicBatch(b *anBatch, rest string) {
	n := len(b.requests)
	if rest != "" {
		n /= 2
	}
	b.counts = map[string]int{"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
	for i := len(b.requests) - 1; i >= 0; i-- {
		r := b.requests[i]
		custom := r.Get("custom_id").Raw
		if i >= n {
			b.results = fmt.Appendf(b.results, `{"custom_id":%s,"result":{"type":%q}}`+"\n", custom, rest)
			b.counts[rest]++
			continue
		}
		status, id, body := s.answerIn(anthropicFormat{}, "/v1/messages", b.header, []byte(r.Get("params").Raw))
		if status == http.StatusOK {
			b.results = fmt.Appendf(b.results, `{"custom_id":%s,"result":{"type":"succeeded","message":%s}}`+"\n", custom, compactJSON(body))
			b.counts["succeeded"]++
		} else {
			e := compactJSON(body)
			if gjson.GetBytes(e, "request_id").Str == "" {
				e = fmt.Appendf(nil, `{"type":"error","error":%s,"request_id":%q}`, gjson.GetBytes(e, "error").Raw, id)
			}
			b.results = fmt.Appendf(b.results, `{"custom_id":%s,"result":{"type":"errored","error":%s}}`+"\n", custom, e)
			b.counts["errored"]++
		}
	}
	b.status = "ended"
}

func (b *anBatch) object() []byte {
	counts := b.counts
	if counts == nil {
		counts = map[string]int{"processing": len(b.requests), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
	}
	ended, results, cancelAt := "null", "null", "null"
	if b.status == "ended" {
		ended = strconv.Quote(time.Now().UTC().Format(time.RFC3339))
		results = strconv.Quote("https://api.anthropic.com/v1/messages/batches/" + b.id + "/results")
	}
	if b.cancelled {
		cancelAt = strconv.Quote(b.created.Format(time.RFC3339))
	}
	return fmt.Appendf(nil, `{"id":%q,"type":"message_batch","processing_status":%q,"request_counts":{"processing":%d,"succeeded":%d,"errored":%d,"canceled":%d,"expired":%d},"ended_at":%s,"created_at":%q,"expires_at":%q,"archived_at":null,"cancel_initiated_at":%s,"results_url":%s}`,
		b.id, b.status, counts["processing"], counts["succeeded"], counts["errored"], counts["canceled"], counts["expired"],
		ended, b.created.Format(time.RFC3339), b.created.Add(24*time.Hour).Format(time.RFC3339), cancelAt, results)
}
