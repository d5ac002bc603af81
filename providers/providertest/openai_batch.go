package providertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// openAIBatchFormat is OpenAI's Files and Batch APIs as far as a batch goes:
// POST /v1/files (multipart, purpose batch), GET /v1/files/{id}/content, POST
// /v1/batches, GET /v1/batches (paged, newest first), GET /v1/batches/{id},
// POST /v1/batches/{id}/cancel; and Azure OpenAI's global batch, the same
// under /openai/files and /openai/batches with ?api-version= and the api-key
// header, its lines' url without /v1 (azure set).
//
// The input is checked as OpenAI checks it (JSONL, custom_id unique,
// method POST, url the batch's endpoint, one model in the file); a bad
// file fails the batch with errors.data. Each line is answered as the
// fake answers the same request live (its scripted models too: a
// fail-500 line ends in the error file). A batch stays in_progress while
// the fake holds batches (HoldBatches), else it completes at the next
// GET; its results come in reverse order. A cancelled batch, and one
// ExpireBatches expires, has answered its first half; an expired batch's
// other lines are batch_expired lines in its error file.
type openAIBatchFormat struct{ azure bool }

func (f openAIBatchFormat) name() string {
	if f.azure {
		return "azure_openai_batch"
	}
	return "openai_batch"
}

func (f openAIBatchFormat) prefix() string {
	if f.azure {
		return "/openai"
	}
	return "/v1"
}

func (f openAIBatchFormat) route(r *http.Request) routing {
	rest, ok := strings.CutPrefix(r.URL.Path, f.prefix())
	if !ok {
		return notMine
	}
	switch {
	case rest == "/files" && r.Method == http.MethodPost,
		strings.HasPrefix(rest, "/files/") && strings.HasSuffix(rest, "/content") && r.Method == http.MethodGet,
		rest == "/batches" && (r.Method == http.MethodPost || r.Method == http.MethodGet),
		strings.HasPrefix(rest, "/batches/") && r.Method == http.MethodGet && !strings.Contains(rest[len("/batches/"):], "/"),
		strings.HasPrefix(rest, "/batches/") && strings.HasSuffix(rest, "/cancel") && r.Method == http.MethodPost:
		return served
	case rest == "/files" || strings.HasPrefix(rest, "/files/") || rest == "/batches" || strings.HasPrefix(rest, "/batches/"):
		return owned
	}
	return notMine
}

func (f openAIBatchFormat) headers(h http.Header, id string) { h.Set("X-Request-Id", "req_"+id) }

func (f openAIBatchFormat) authorized(r *http.Request, want string) bool {
	if f.azure {
		return azureFormat{}.authorized(r, want)
	}
	return keyOK(bearer(r), want)
}

func (openAIBatchFormat) model(*http.Request, []byte) string { return "" }

func (f openAIBatchFormat) fail(w http.ResponseWriter, r *http.Request, ft fault) {
	openAIFormat{}.fail(w, r, ft)
}

// maxBody lets the Files API take files up to OpenAI's 512 MB.
func (openAIBatchFormat) maxBody() int64 { return 512 << 20 }

// batchFile is a file of the fake's Files API.
type batchFile struct {
	id, name, purpose string
	content           []byte
	created           int64
}

// openAIBatch is a batch of the fake's Batch API.
type openAIBatch struct {
	obj      map[string]any
	model    string
	lines    []gjson.Result // the input lines
	azure    bool
	answered int // lines answered when it ended
}

// batchStore is the state of the fake's Files and Batch APIs.
type batchStore struct {
	mu      sync.Mutex
	files   map[string]*batchFile
	batches map[string]*openAIBatch
	order   []string // batch ids, oldest first
	hold    bool
	creates int
	polls   map[string]int
}

func (s *Server) batchStore() *batchStore {
	s.batchOnce.Do(func() {
		s.batchAPI = &batchStore{files: map[string]*batchFile{}, batches: map[string]*openAIBatch{}, polls: map[string]int{}}
	})
	return s.batchAPI
}

// HoldBatches keeps every batch of the fake's batch APIs in progress
// (hold true) or lets them end at their next poll.
func (s *Server) HoldBatches(hold bool) {
	st := s.batchStore()
	st.mu.Lock()
	st.hold = hold
	st.mu.Unlock()
	s.batchHoldMu.Lock()
	s.batchHold = hold
	s.batchHoldMu.Unlock()
}

// BatchesCreated is how many batches the fake's OpenAI and Azure batch
// APIs created.
func (s *Server) BatchesCreated() int {
	st := s.batchStore()
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.creates
}

// ExpireBatches ends every batch in progress as expired at the provider.
func (s *Server) ExpireBatches() {
	st := s.batchStore()
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, b := range st.batches {
		if b.obj["status"] == "in_progress" {
			s.endBatch(st, b, "expired")
		}
	}
	an := s.anthropicBatches()
	an.mu.Lock()
	defer an.mu.Unlock()
	for _, b := range an.batches {
		if b.status == "in_progress" {
			s.endAnthropicBatch(b, "expired")
		}
	}
	gb := s.geminiBatches()
	gb.mu.Lock()
	defer gb.mu.Unlock()
	for _, b := range gb.batches {
		if b.state == "BATCH_STATE_RUNNING" {
			s.endGeminiBatch(b, "BATCH_STATE_EXPIRED")
		}
	}
	bj := s.bedrockJobs()
	bj.mu.Lock()
	defer bj.mu.Unlock()
	for _, j := range bj.jobs {
		if j.running() {
			s.endBedrockJob(j, "Expired")
		}
	}
	vj := s.vertexJobs()
	vj.mu.Lock()
	defer vj.mu.Unlock()
	for _, j := range vj.jobs {
		if j.running() {
			s.endVertexJob(j, "JOB_STATE_EXPIRED")
		}
	}
}

// AnthropicBatchesCreated is how many message batches the fake created.
func (s *Server) AnthropicBatchesCreated() int {
	st := s.anthropicBatches()
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.order)
}

func (f openAIBatchFormat) serve(c *call) {
	st := c.s.batchStore()
	if f.azure && c.r.URL.Query().Get("api-version") == "" {
		openAIError(c.w, http.StatusNotFound, "invalid_request_error", "404", "Resource not found: api-version is required")
		return
	}
	rest := strings.TrimPrefix(c.r.URL.Path, f.prefix())
	switch {
	case rest == "/files":
		f.upload(c, st)
	case strings.HasPrefix(rest, "/files/"):
		f.content(c, st, strings.TrimSuffix(strings.TrimPrefix(rest, "/files/"), "/content"))
	case rest == "/batches" && c.r.Method == http.MethodPost:
		f.create(c, st)
	case rest == "/batches":
		f.list(c, st)
	case strings.HasSuffix(rest, "/cancel"):
		f.cancel(c, st, strings.TrimSuffix(strings.TrimPrefix(rest, "/batches/"), "/cancel"))
	default:
		f.get(c, st, strings.TrimPrefix(rest, "/batches/"))
	}
}

func (f openAIBatchFormat) upload(c *call, st *batchStore) {
	mt, params, err := mime.ParseMediaType(c.r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		openAIParamError(c.w, http.StatusBadRequest, "", "the body must be multipart/form-data")
		return
	}
	mr := multipart.NewReader(bytes.NewReader(c.body), params["boundary"])
	file := &batchFile{created: time.Now().Unix()}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			openAIParamError(c.w, http.StatusBadRequest, "", "the multipart body is malformed")
			return
		}
		b, _ := io.ReadAll(p)
		switch p.FormName() {
		case "purpose":
			file.purpose = string(b)
		case "file":
			file.name, file.content = p.FileName(), b
		}
	}
	switch {
	case file.purpose != "batch":
		openAIParamError(c.w, http.StatusBadRequest, "purpose", "purpose must be batch")
		return
	case file.name == "":
		openAIParamError(c.w, http.StatusBadRequest, "file", "a file is required")
		return
	}
	st.mu.Lock()
	file.id = "file-" + strconv.Itoa(len(st.files)+1)
	st.files[file.id] = file
	st.mu.Unlock()
	writeJSON(c.w, http.StatusOK, fmt.Appendf(nil, `{"id":%q,"object":"file","bytes":%d,"created_at":%d,"filename":%q,"purpose":"batch","status":"processed","expires_at":null}`,
		file.id, len(file.content), file.created, file.name))
}

func (f openAIBatchFormat) content(c *call, st *batchStore, id string) {
	st.mu.Lock()
	file := st.files[id]
	st.mu.Unlock()
	if file == nil {
		openAIError(c.w, http.StatusNotFound, "invalid_request_error", "", "No such File object: "+id)
		return
	}
	c.w.Header().Set("Content-Type", "application/octet-stream")
	c.w.WriteHeader(http.StatusOK)
	_, _ = c.w.Write(file.content)
}

// endpoint is the batch endpoint as lines and the create call name it.
func (f openAIBatchFormat) endpoints() []string {
	if f.azure {
		return []string{"/chat/completions", "/embeddings"}
	}
	return []string{"/v1/chat/completions", "/v1/embeddings"}
}

func (f openAIBatchFormat) create(c *call, st *batchStore) {
	if !gjson.ValidBytes(c.body) {
		openAIParamError(c.w, http.StatusBadRequest, "", "the body is not JSON")
		return
	}
	q := gjson.GetManyBytes(c.body, "input_file_id", "endpoint", "completion_window", "metadata")
	switch {
	case !slices.Contains(f.endpoints(), q[1].Str):
		openAIParamError(c.w, http.StatusBadRequest, "endpoint", "endpoint must be one of "+strings.Join(f.endpoints(), ", "))
		return
	case q[2].Str != "24h":
		openAIParamError(c.w, http.StatusBadRequest, "completion_window", "completion_window must be 24h")
		return
	case q[3].Exists() && (!q[3].IsObject() || len(q[3].Map()) > 16):
		openAIParamError(c.w, http.StatusBadRequest, "metadata", "metadata holds at most 16 string pairs")
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	file := st.files[q[0].Str]
	if file == nil || file.purpose != "batch" {
		openAIParamError(c.w, http.StatusBadRequest, "input_file_id", "no batch file with id "+q[0].Str)
		return
	}
	st.creates++
	id := "batch_" + strconv.Itoa(st.creates)
	now := time.Now().Unix()
	b := &openAIBatch{azure: f.azure, obj: map[string]any{
		"id": id, "object": "batch", "endpoint": q[1].Str, "errors": nil, "input_file_id": file.id, "completion_window": "24h",
		"status": "in_progress", "output_file_id": nil, "error_file_id": nil, "created_at": now, "in_progress_at": now,
		"expires_at": now + 86400, "finalizing_at": nil, "completed_at": nil, "failed_at": nil, "expired_at": nil,
		"cancelling_at": nil, "cancelled_at": nil, "request_counts": map[string]any{"total": 0, "completed": 0, "failed": 0},
		"metadata": nil,
	}}
	if q[3].Exists() {
		md := map[string]string{}
		for k, v := range q[3].Map() {
			md[k] = v.String()
		}
		b.obj["metadata"] = md
	}
	if msg, line := b.check(file.content, q[1].Str); msg != "" {
		b.obj["status"], b.obj["failed_at"] = "failed", now
		b.obj["errors"] = map[string]any{"object": "list", "data": []any{map[string]any{"code": "invalid_request", "message": msg, "param": nil, "line": line}}}
	}
	b.obj["request_counts"] = map[string]any{"total": len(b.lines), "completed": 0, "failed": 0}
	st.batches[id] = b
	st.order = append(st.order, id)
	writeJSON(c.w, http.StatusOK, mustJSON(b.obj))
}

// check reads the input file's lines as OpenAI does; it returns why the
// file is refused, and the 1-based line.
func (b *openAIBatch) check(content []byte, endpoint string) (string, int) {
	seen := map[string]bool{}
	for i, raw := range bytes.Split(bytes.TrimSuffix(content, []byte{'\n'}), []byte{'\n'}) {
		line := gjson.ParseBytes(raw)
		f := line.Get("@this").Map()
		switch {
		case !gjson.ValidBytes(raw) || !line.IsObject():
			return "the line is not a JSON object", i + 1
		case f["custom_id"].Type != gjson.String || seen[f["custom_id"].Str]:
			return "custom_id must be a string, unique in the file", i + 1
		case f["method"].Str != "POST":
			return "method must be POST", i + 1
		case f["url"].Str != endpoint:
			return "url must be the batch's endpoint, " + endpoint, i + 1
		case !f["body"].IsObject():
			return "body must be an object", i + 1
		}
		seen[f["custom_id"].Str] = true
		model := f["body"].Get("model").Str
		if b.model == "" {
			b.model = model
		} else if model != b.model {
			return "every line of a batch must name the same model", i + 1
		}
		b.lines = append(b.lines, line)
	}
	if len(b.lines) == 0 {
		return "the file holds no requests", 0
	}
	return "", 0
}

func (f openAIBatchFormat) list(c *call, st *batchStore) {
	limit, _ := strconv.Atoi(c.r.URL.Query().Get("limit"))
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	after := c.r.URL.Query().Get("after")
	st.mu.Lock()
	defer st.mu.Unlock()
	var data []any
	started := after == ""
	more := false
	for i := len(st.order) - 1; i >= 0; i-- {
		id := st.order[i]
		if !started {
			started = id == after
			continue
		}
		if st.batches[id].azure != f.azure {
			continue
		}
		if len(data) == limit {
			more = true
			break
		}
		data = append(data, st.batches[id].obj)
	}
	writeJSON(c.w, http.StatusOK, mustJSON(map[string]any{"object": "list", "data": data, "has_more": more}))
}

func (f openAIBatchFormat) get(c *call, st *batchStore, id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	b := st.batches[id]
	if b == nil || b.azure != f.azure {
		openAIError(c.w, http.StatusNotFound, "invalid_request_error", "", "No such Batch object: "+id)
		return
	}
	st.polls[id]++
	switch b.obj["status"] {
	case "in_progress":
		if !st.hold {
			c.s.endBatch(st, b, "completed")
		}
	case "cancelling":
		c.s.endBatch(st, b, "cancelled")
	}
	writeJSON(c.w, http.StatusOK, mustJSON(b.obj))
}

func (f openAIBatchFormat) cancel(c *call, st *batchStore, id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	b := st.batches[id]
	if b == nil || b.azure != f.azure {
		openAIError(c.w, http.StatusNotFound, "invalid_request_error", "", "No such Batch object: "+id)
		return
	}
	if b.obj["status"] == "in_progress" {
		b.obj["status"], b.obj["cancelling_at"] = "cancelling", time.Now().Unix()
	}
	writeJSON(c.w, http.StatusOK, mustJSON(b.obj))
}

// endBatch answers b's lines (all, or the first half when it is cancelled
// or expires) as the fake answers them live, and writes its output and
// error files, in reverse order. Held under st.mu.
func (s *Server) endBatch(st *batchStore, b *openAIBatch, status string) {
	n := len(b.lines)
	if status != "completed" {
		n /= 2
	}
	var out, errs []byte
	completed, failed := 0, 0
	for i := len(b.lines) - 1; i >= 0; i-- {
		line := b.lines[i]
		custom := line.Get("custom_id").Raw
		reqID := "batch_req_" + strconv.Itoa(i+1)
		if i >= n {
			if status == "expired" {
				errs = fmt.Appendf(errs, `{"id":%q,"custom_id":%s,"response":null,"error":{"code":"batch_expired","message":"This request could not be executed before the completion window expired."}}`+"\n", reqID, custom)
				failed++
			}
			continue
		}
		status, id, body := s.answerLive(b.obj["endpoint"].(string), []byte(line.Get("body").Raw))
		l := fmt.Appendf(nil, `{"id":%q,"custom_id":%s,"response":{"status_code":%d,"request_id":%q,"body":%s},"error":null}`+"\n", reqID, custom, status, id, compactJSON(body))
		if status == http.StatusOK {
			out = append(out, l...)
			completed++
		} else {
			errs = append(errs, l...)
			failed++
		}
	}
	now := time.Now().Unix()
	for _, f := range []struct {
		content []byte
		key     string
	}{{out, "output_file_id"}, {errs, "error_file_id"}} {
		if len(f.content) == 0 {
			continue
		}
		file := &batchFile{id: "file-" + strconv.Itoa(len(st.files)+1), name: f.key + ".jsonl", purpose: "batch_output", content: f.content, created: now}
		st.files[file.id] = file
		b.obj[f.key] = file.id
	}
	b.obj["status"] = status
	b.obj[map[string]string{"completed": "completed_at", "cancelled": "cancelled_at", "expired": "expired_at"}[status]] = now
	b.obj["request_counts"] = map[string]any{"total": len(b.lines), "completed": completed, "failed": failed}
	b.answered = n
}

// answerLive answers one request as the fake answers it on the live
// endpoint, in-process: its status, request id and body.
func (s *Server) answerLive(endpoint string, body []byte) (int, string, []byte) {
	var f wireFormat = openAIFormat{}
	path := "/v1/chat/completions"
	if strings.HasSuffix(endpoint, "/embeddings") {
		f, path = formatFor("openai_embeddings"), "/v1/embeddings"
	}
	return s.answerIn(f, path, nil, body)
}

// answerIn serves one request in-process with format f at path, past
// authentication, as ServeHTTP serves it.
func (s *Server) answerIn(f wireFormat, path string, header http.Header, body []byte) (int, string, []byte) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	for k, v := range header {
		r.Header[k] = v
	}
	r.Header.Set("Content-Type", "application/json")
	c := &call{s: s, f: f, w: rec, r: r, body: body, id: strconv.FormatInt(s.seq.Add(1), 10)}
	c.model = f.model(r, body)
	f.headers(rec.Header(), c.id)
	f.serve(c)
	id := rec.Header().Get("X-Request-Id")
	if id == "" {
		id = rec.Header().Get("Request-Id")
	}
	return rec.Code, id, rec.Body.Bytes()
}

// formatFor is the format named name.
func formatFor(name string) wireFormat {
	for _, f := range append(formats[:len(formats):len(formats)], registeredFormats()...) {
		if f.name() == name {
			return f
		}
	}
	return fallback
}

func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return []byte("null")
	}
	return buf.Bytes()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
