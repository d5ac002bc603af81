package providertest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// geminiBatchFormat is the Gemini Developer API's batch mode POST
// /v1beta/models/{model}:batchGenerateContent with the requests inline
// ({"batch":{"displayName","inputConfig":
// {"requests":{"requests":[{"request","metadata"}]}}}}), GET /v1beta/batches
// (operations, paged), GET /v1beta/batches/{id} (the operation:
// metadata.state, batchStats, and once it ended
// response.inlinedResponses.inlinedResponses), POST
// /v1beta/batches/{id}:cancel. Each request is answered as the fake answers it
// on :generateContent (an invalid one is an inline error); HoldBatches and
// ExpireBatches decide when batches end, as for the other batch APIs; answers
// come in reverse order. The key is x-goog-api-key.
type geminiBatchFormat struct{}

func (geminiBatchFormat) name() string { return "gemini_batch" }

func (geminiBatchFormat) route(r *http.Request) routing {
	p := r.URL.Path
	switch rest, ok := strings.CutPrefix(p, geminiPrefix); {
	case ok && strings.HasPrefix(rest, "models/") && strings.HasSuffix(rest, ":batchGenerateContent"):
		if r.Method == http.MethodPost {
			return served
		}
		return owned
	case ok && rest == "batches":
		if r.Method == http.MethodGet {
			return served
		}
		return owned
	case ok && strings.HasPrefix(rest, "batches/"):
		id, method, _ := strings.Cut(strings.TrimPrefix(rest, "batches/"), ":")
		if id != "" && !strings.Contains(id, "/") && (method == "" && r.Method == http.MethodGet || method == "cancel" && r.Method == http.MethodPost) {
			return served
		}
		return owned
	}
	return notMine
}

func (geminiBatchFormat) headers(http.Header, string) {}

func (geminiBatchFormat) authorized(r *http.Request, want string) bool {
	return keyOK(geminiKey(r), want)
}

func (geminiBatchFormat) model(r *http.Request, _ []byte) string {
	rest := strings.TrimPrefix(r.URL.Path, geminiPrefix+"models/")
	m, _, _ := strings.Cut(rest, ":")
	return m
}

func (geminiBatchFormat) fail(w http.ResponseWriter, r *http.Request, f fault) {
	googleFault(w, r, f, false)
}

type geminiBatch struct {
	name, display, model string
	requests             []gjson.Result
	key                  string
	state                string
	answers              []byte
	ok, failed           int
}

type geminiBatchStore struct {
	mu      sync.Mutex
	batches map[string]*geminiBatch
	order   []string
}

func (s *Server) geminiBatches() *geminiBatchStore {
	s.gemOnce.Do(func() { s.gemBatchAPI = &geminiBatchStore{batches: map[string]*geminiBatch{}} })
	return s.gemBatchAPI
}

// GeminiBatchesCreated is how many batches the fake's batch mode created.
func (s *Server) GeminiBatchesCreated() int {
	st := s.geminiBatches()
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.order)
}

func (f geminiBatchFormat) serve(c *call) {
	st := c.s.geminiBatches()
	rest := strings.TrimPrefix(c.r.URL.Path, geminiPrefix)
	switch {
	case strings.HasPrefix(rest, "models/"):
		f.create(c, st)
	case rest == "batches":
		f.list(c, st)
	default:
		id, method, _ := strings.Cut(rest, ":")
		st.mu.Lock()
		defer st.mu.Unlock()
		b := st.batches[id]
		if b == nil {
			googleError(c.w, http.StatusNotFound, "NOT_FOUND", "no batch "+id, "")
			return
		}
		c.s.batchHoldMu.Lock()
		hold := c.s.batchHold
		c.s.batchHoldMu.Unlock()
		switch {
		case method == "cancel":
			if b.state == "BATCH_STATE_RUNNING" {
				c.s.endGeminiBatch(b, "BATCH_STATE_CANCELLED")
			}
			writeJSON(c.w, http.StatusOK, []byte(`{}`))
			return
		case b.state == "BATCH_STATE_RUNNING" && !hold:
			c.s.endGeminiBatch(b, "BATCH_STATE_SUCCEEDED")
		}
		writeJSON(c.w, http.StatusOK, b.operation())
	}
}

func (f geminiBatchFormat) create(c *call, st *geminiBatchStore) {
	reqs := gjson.GetBytes(c.body, "batch.inputConfig.requests.requests")
	if !gjson.ValidBytes(c.body) || !reqs.IsArray() || len(reqs.Array()) == 0 {
		googleError(c.w, http.StatusBadRequest, "INVALID_ARGUMENT", "batch.inputConfig.requests.requests: a non-empty list is required", "")
		return
	}
	b := &geminiBatch{display: gjson.GetBytes(c.body, "batch.displayName").Str, model: c.model, key: geminiKey(c.r), state: "BATCH_STATE_RUNNING"}
	for i, r := range reqs.Array() {
		if !r.Get("request").IsObject() {
			googleError(c.w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("requests[%d].request: a GenerateContentRequest is required", i), "")
			return
		}
		b.requests = append(b.requests, r)
	}
	st.mu.Lock()
	b.name = "batches/gb" + strconv.Itoa(len(st.order)+1)
	st.batches[b.name] = b
	st.order = append(st.order, b.name)
	// Rendered under the lock: once stored, the batch may be ended
	// (ExpireBatches, a cancel) by another goroutine.
	op := b.operation()
	st.mu.Unlock()
	writeJSON(c.w, http.StatusOK, op)
}

func (f geminiBatchFormat) list(c *call, st *geminiBatchStore) {
	size, _ := strconv.Atoi(c.r.URL.Query().Get("pageSize"))
	if size <= 0 || size > 1000 {
		size = 50
	}
	from, _ := strconv.Atoi(c.r.URL.Query().Get("pageToken"))
	st.mu.Lock()
	defer st.mu.Unlock()
	b := []byte(`{"operations":[`)
	n := 0
	i := len(st.order) - 1 - from
	for ; i >= 0 && n < size; i-- {
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, st.batches[st.order[i]].operation()...)
		n++
	}
	b = append(b, ']')
	if i >= 0 {
		b = fmt.Appendf(b, `,"nextPageToken":"%d"`, from+n)
	}
	writeJSON(c.w, http.StatusOK, append(b, '}'))
}

// endGeminiBatch answers the batch's requests (all, or the first half
// when it is cancelled or expires), in reverse order.
func (s *Server) endGeminiBatch(b *geminiBatch, state string) {
	n := len(b.requests)
	if state != "BATCH_STATE_SUCCEEDED" {
		n /= 2
	}
	header := http.Header{"X-Goog-Api-Key": {b.key}}
	for i := n - 1; i >= 0; i-- {
		r := b.requests[i]
		status, _, body := s.answerIn(geminiFormat{}, geminiPrefix+"models/"+b.model+":generateContent", header, []byte(r.Get("request").Raw))
		if len(b.answers) > 0 {
			b.answers = append(b.answers, ',')
		}
		md := r.Get("metadata").Raw
		if md == "" {
			md = "{}"
		}
		if status == http.StatusOK {
			b.answers = fmt.Appendf(b.answers, `{"response":%s,"metadata":%s}`, compactJSON(body), md)
			b.ok++
		} else {
			b.answers = fmt.Appendf(b.answers, `{"error":%s,"metadata":%s}`, gjson.GetBytes(compactJSON(body), "error").Raw, md)
			b.failed++
		}
	}
	b.state = state
}

func (b *geminiBatch) operation() []byte {
	op := fmt.Appendf(nil, `{"name":%q,"metadata":{"@type":"type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch","model":"models/%s","displayName":%q,"state":%q,"batchStats":{"requestCount":"%d","successfulRequestCount":"%d","failedRequestCount":"%d","pendingRequestCount":"%d"}}`,
		b.name, b.model, b.display, b.state, len(b.requests), b.ok, b.failed, len(b.requests)-b.ok-b.failed)
	if b.state == "BATCH_STATE_RUNNING" {
		return append(op, `,"done":false}`...)
	}
	return fmt.Appendf(op, `,"done":true,"response":{"@type":"type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput","inlinedResponses":{"inlinedResponses":[%s]}}}`, b.answers)
}
