package providertest

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// vertexBatchFormat is Vertex AI's batch prediction for Gemini and Claude
// models:
// POST /v1/projects/{project}/locations/{location}/batchPredictionJobs
// ({"displayName","model","inputConfig":{"instancesFormat":"jsonl",
// "gcsSource":{"uris"}},"outputConfig":{"predictionsFormat":"jsonl",
// "gcsDestination":{"outputUriPrefix"}}}), GET …/batchPredictionJobs
// (filter display_name="…", pageSize, pageToken), GET
// …/batchPredictionJobs/{id} and POST …/batchPredictionJobs/{id}:cancel,
// with the bearer tokens vertexFormat takes. The input, lines
// {"request": GenerateContentRequest} (Claude: {"custom_id","request"},
// the request a rawPredict body), is read from Options.Objects once the
// job runs; each request is answered as the fake answers generateContent
// (rawPredict) on Vertex AI for the job's model, and the output, lines
// (Claude's with their custom_id first)
// {"status":"","processed_time","request","response"} or {"status":
// "<reason>: <Google's error JSON>","processed_time","request"} in reverse
// order, is written to
// {outputUriPrefix}/prediction-model-{time}/predictions.jsonl, the
// directory the job's outputInfo.gcsOutputDirectory names. HoldBatches
// and ExpireBatches decide when jobs end, as for the other batch APIs; a
// cancelled or expired job answers its first half.
type vertexBatchFormat struct{}

const vertexJobs = "batchPredictionJobs"

// vertexJobPath splits a path below /v1/projects/ into the collection
// ("projects/p/locations/l"), the job's id and its method.
func vertexJobPath(p string) (parent, id, method string, ok bool) {
	rest, found := strings.CutPrefix(p, vertexPrefix)
	if !found {
		return "", "", "", false
	}
	seg := strings.Split(rest, "/")
	if len(seg) < 4 || seg[1] != "locations" || seg[3] != vertexJobs || seg[0] == "" || seg[2] == "" {
		return "", "", "", false
	}
	parent = "projects/" + seg[0] + "/locations/" + seg[2]
	switch len(seg) {
	case 4:
		return parent, "", "", true
	case 5:
		id, method, _ = strings.Cut(seg[4], ":")
		return parent, id, method, id != ""
	}
	return "", "", "", false
}

func (vertexBatchFormat) name() string { return "vertex_batch" }

func (vertexBatchFormat) route(r *http.Request) routing {
	_, id, method, ok := vertexJobPath(r.URL.Path)
	switch {
	case !ok:
		return notMine
	case id == "" && (r.Method == http.MethodPost || r.Method == http.MethodGet),
		id != "" && method == "" && r.Method == http.MethodGet,
		id != "" && method == "cancel" && r.Method == http.MethodPost:
		return served
	}
	return owned
}

func (vertexBatchFormat) headers(http.Header, string) {}

func (vertexBatchFormat) authorized(r *http.Request, want string) bool {
	tok := bearer(r)
	return strings.HasPrefix(tok, googleTokenPrefix) || keyOK(tok, want)
}

func (vertexBatchFormat) model(_ *http.Request, body []byte) string {
	m := gjson.GetBytes(body, "model").Str
	return m[strings.LastIndexByte(m, '/')+1:]
}

func (vertexBatchFormat) fail(w http.ResponseWriter, r *http.Request, f fault) {
	googleFault(w, r, f, true)
}

// vertexJob is a batch prediction job of the fake.
type vertexJob struct {
	name, display, model, parent string
	publisher                    string // google or anthropic
	inURI, outPrefix, outDir     string
	state                        string
	ok, failed, total            int
	message                      string
	created                      time.Time
}

type vertexJobStore struct {
	mu    sync.Mutex
	jobs  map[string]*vertexJob // by name
	order []string
}

func (s *Server) vertexJobs() *vertexJobStore {
	s.vjOnce.Do(func() { s.vjAPI = &vertexJobStore{jobs: map[string]*vertexJob{}} })
	return s.vjAPI
}

// VertexJobsCreated is how many batch prediction jobs the fake created.
func (s *Server) VertexJobsCreated() int {
	st := s.vertexJobs()
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.order)
}

func (f vertexBatchFormat) serve(c *call) {
	if tok := bearer(c.r); strings.HasPrefix(tok, googleTokenPrefix) {
		if issued, expired := c.s.googleTokenState(tok); !issued || expired {
			googleError(c.w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials.", "")
			return
		}
	}
	parent, id, method, _ := vertexJobPath(c.r.URL.Path)
	st := c.s.vertexJobs()
	switch {
	case id == "" && c.r.Method == http.MethodPost:
		f.create(c, st, parent)
	case id == "":
		f.list(c, st, parent)
	default:
		st.mu.Lock()
		defer st.mu.Unlock()
		j := st.jobs[parent+"/"+vertexJobs+"/"+id]
		if j == nil {
			googleError(c.w, http.StatusNotFound, "NOT_FOUND", "The BatchPredictionJob does not exist.", "")
			return
		}
		if method == "cancel" {
			if j.running() {
				c.s.endVertexJob(j, "JOB_STATE_CANCELLED")
			}
			writeJSON(c.w, http.StatusOK, []byte(`{}`))
			return
		}
		c.s.batchHoldMu.Lock()
		hold := c.s.batchHold
		c.s.batchHoldMu.Unlock()
		if j.running() && !hold {
			c.s.endVertexJob(j, "JOB_STATE_SUCCEEDED")
		}
		writeJSON(c.w, http.StatusOK, j.object())
	}
}

func (f vertexBatchFormat) create(c *call, st *vertexJobStore, parent string) {
	if !validJSON(c.body) {
		googleError(c.w, http.StatusBadRequest, "INVALID_ARGUMENT", msgUnreadable, "")
		return
	}
	q := gjson.GetManyBytes(c.body, "displayName", "model", "inputConfig.instancesFormat", "inputConfig.gcsSource.uris",
		"outputConfig.predictionsFormat", "outputConfig.gcsDestination.outputUriPrefix")
	uris := q[3].Array()
	switch {
	case q[0].Str == "":
		googleError(c.w, http.StatusBadRequest, "INVALID_ARGUMENT", "List of found errors:\t1.Field: batch_prediction_job.display_name; Message: Required field is not set.", "")
	case vertexPublisher(q[1].Str) == "":
		googleError(c.w, http.StatusBadRequest, "INVALID_ARGUMENT", "model: a publisher model (publishers/{google,anthropic}/models/{model}) is required", "")
	case q[2].Str != "jsonl" || q[4].Str != "jsonl":
		googleError(c.w, http.StatusBadRequest, "INVALID_ARGUMENT", "instancesFormat and predictionsFormat must be jsonl here", "")
	case len(uris) != 1 || !strings.HasPrefix(uris[0].Str, "gs://") || !strings.HasPrefix(q[5].Str, "gs://"):
		googleError(c.w, http.StatusBadRequest, "INVALID_ARGUMENT", "gcsSource.uris and gcsDestination.outputUriPrefix need gs:// URIs", "")
	default:
		st.mu.Lock()
		defer st.mu.Unlock()
		j := &vertexJob{name: parent + "/" + vertexJobs + "/" + strconv.Itoa(7000000000+len(st.order)+1), display: q[0].Str,
			model: c.model, publisher: vertexPublisher(q[1].Str), parent: parent, inURI: uris[0].Str, outPrefix: strings.TrimSuffix(q[5].Str, "/"),
			state: "JOB_STATE_PENDING", created: time.Now().UTC()}
		st.jobs[j.name] = j
		st.order = append(st.order, j.name)
		writeJSON(c.w, http.StatusOK, j.object())
	}
}

func (f vertexBatchFormat) list(c *call, st *vertexJobStore, parent string) {
	q := c.r.URL.Query()
	want, filtered := strings.CutPrefix(q.Get("filter"), "display_name=")
	want = strings.Trim(want, `"`)
	size, _ := strconv.Atoi(q.Get("pageSize"))
	if size <= 0 || size > 100 {
		size = 100
	}
	from, _ := strconv.Atoi(q.Get("pageToken"))
	st.mu.Lock()
	defer st.mu.Unlock()
	b := []byte(`{"batchPredictionJobs":[`)
	n, i := 0, len(st.order)-1
	for skipped := 0; i >= 0 && n < size; i-- {
		j := st.jobs[st.order[i]]
		if j.parent != parent || filtered && j.display != want {
			continue
		}
		if skipped < from {
			skipped++
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, j.object()...)
		n++
	}
	b = append(b, ']')
	if i >= 0 {
		b = fmt.Appendf(b, `,"nextPageToken":"%d"`, from+n)
	}
	writeJSON(c.w, http.StatusOK, append(b, '}'))
}

func (j *vertexJob) running() bool {
	switch j.state {
	case "JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_CANCELLING":
		return true
	}
	return false
}

func (j *vertexJob) object() []byte {
	b := []byte(`{"name":`)
	b = appendString(b, j.name)
	b = append(b, `,"displayName":`...)
	b = appendString(b, j.display)
	b = fmt.Appendf(b, `,"model":"publishers/%s/models/%s","state":%q,"createTime":%q`, j.publisher, j.model, j.state, j.created.Format(time.RFC3339Nano))
	b = append(b, `,"inputConfig":{"instancesFormat":"jsonl","gcsSource":{"uris":[`...)
	b = appendString(b, j.inURI)
	b = append(b, `]}},"outputConfig":{"predictionsFormat":"jsonl","gcsDestination":{"outputUriPrefix":`...)
	b = appendString(b, j.outPrefix)
	b = append(b, `}}`...)
	if j.outDir != "" {
		b = append(b, `,"outputInfo":{"gcsOutputDirectory":`...)
		b = appendString(b, j.outDir)
		b = fmt.Appendf(b, `},"completionStats":{"successfulCount":"%d","failedCount":"%d","incompleteCount":"%d"}`, j.ok, j.failed, j.total-j.ok-j.failed)
	}
	if j.message != "" {
		b = append(b, `,"error":{"code":3,"message":`...)
		b = appendString(b, j.message)
		b = append(b, '}')
	}
	return append(b, '}')
}

// splitGS reads gs://bucket/object.
func splitGS(uri string) (bucket, object string) {
	bucket, object, _ = strings.Cut(strings.TrimPrefix(uri, "gs://"), "/")
	return bucket, object
}

// endVertexJob answers the job's requests (all of them, or the first
// half when it is cancelled or expires), writes its output and ends it in
// state.
func (s *Server) endVertexJob(j *vertexJob, state string) {
	fail := func(msg string) { j.state, j.message = "JOB_STATE_FAILED", msg }
	if s.opts.Objects == nil {
		fail("the fake has no object store (Options.Objects)")
		return
	}
	input, err := s.opts.Objects.Get(splitGS(j.inURI))
	if err != nil {
		fail("Failed to read the input " + j.inURI + ": " + err.Error())
		return
	}
	var lines [][]byte
	for line := range bytes.SplitSeq(input, []byte("\n")) {
		if line = bytes.TrimSpace(line); len(line) > 0 {
			lines = append(lines, line)
		}
	}
	j.total = len(lines)
	n := len(lines)
	if state != "JOB_STATE_SUCCEEDED" {
		n /= 2
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	var out []byte
	for i := n - 1; i >= 0; i-- {
		req := gjson.GetBytes(lines[i], "request")
		if !validJSON(lines[i]) || !req.IsObject() {
			out = fmt.Appendf(out, `{"status":"Invalid input: a line needs a request object.","processed_time":%q,"request":{}}`+"\n", now)
			j.failed++
			continue
		}
		status, body := s.vertexGenerate(j, []byte(req.Raw))
		id := ""
		if j.publisher == "anthropic" {
			id = `"custom_id":` + string(appendString(nil, gjson.GetBytes(lines[i], "custom_id").Str)) + ","
		}
		if status == http.StatusOK {
			out = fmt.Appendf(out, `{%s"status":"","processed_time":%q,"request":%s,"response":%s}`+"\n", id, now, compactJSON([]byte(req.Raw)), compactJSON(body))
			j.ok++
		} else {
			out = append(out, '{')
			out = append(out, id...)
			out = append(out, `"status":`...)
			out = appendString(out, http.StatusText(status)+": "+string(compactJSON(body)))
			out = fmt.Appendf(out, `,"processed_time":%q,"request":%s}`+"\n", now, compactJSON([]byte(req.Raw)))
			j.failed++
		}
	}
	j.outDir = j.outPrefix + "/prediction-model-" + strings.NewReplacer(":", "-", ".", "-").Replace(j.created.Format("2006-01-02T15:04:05.000000Z"))
	bucket, dir := splitGS(j.outDir)
	if err := s.opts.Objects.Put(bucket, dir+"/predictions.jsonl", out); err != nil {
		fail("Failed to write the output to " + j.outDir + ": " + err.Error())
		return
	}
	j.state = state
}

// vertexGenerate answers a request for the job's model as the fake
// answers generateContent on Vertex AI, or rawPredict for Claude.
func (s *Server) vertexGenerate(j *vertexJob, body []byte) (int, []byte) {
	rec := httptest.NewRecorder()
	method := ":generateContent"
	if j.publisher == "anthropic" {
		method = ":rawPredict"
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/"+j.parent+"/publishers/"+j.publisher+"/models/"+j.model+method, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	c := &call{s: s, f: vertexFormat{}, w: rec, r: r, body: body, model: j.model, id: strconv.FormatInt(s.seq.Add(1), 10)}
	if j.publisher == "anthropic" {
		serveVertexClaude(c, "rawPredict")
	} else {
		serveGenerate(c, true)
	}
	return rec.Code, rec.Body.Bytes()
}

// vertexPublisher is the publisher of a job's model,
// [projects/…/locations/…/]publishers/{google,anthropic}/models/{name}.
func vertexPublisher(model string) string {
	for _, p := range []string{"google", "anthropic"} {
		prefix := "publishers/" + p + "/models/"
		if i := strings.Index(model, prefix); (i == 0 || i > 0 && model[i-1] == '/') && len(model) > i+len(prefix) {
			return p
		}
	}
	return ""
}
