package providertest

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// Objects is the object storage (an S3 bucket, a Cloud Storage bucket) the
// batch fakes of Bedrock and Vertex AI read their input from and write their
// output to, as the providers' jobs do: a test gives the fake the store its
// storage fake keeps, the same the code under test writes through S3's or
// Cloud Storage's API.
type Objects interface {
	// Get returns the object's bytes; an error when there is none.
	Get(bucket, key string) ([]byte, error)
	// Put stores an object.
	Put(bucket, key string, data []byte) error
}

// bedrockBatchFormat is Bedrock's batch inference on the control plane
// (bedrock.{region}.amazonaws.com, SigV4 service "bedrock"), as
// aws-sdk-go-v2's service/bedrock sends it: POST /model-invocation-job
// (CreateModelInvocationJob: jobName, roleArn, modelId, clientRequestToken,
// inputDataConfig.s3InputDataConfig.s3Uri, outputDataConfig.
// s3OutputDataConfig.s3Uri), GET /model-invocation-job/{jobIdentifier}
// (the job's ARN, escaped), POST /model-invocation-job/{jobIdentifier}/stop
// and GET /model-invocation-jobs (nameContains, maxResults, nextToken). A
// clientRequestToken seen before returns that job again. The input is read
// from Options.Objects once the job runs (a job of fewer than 100 records,
// or whose input is missing, fails, as Bedrock's validation fails it); each
// record's modelInput is answered as the fake answers InvokeModel for the
// job's model, and the output, {"recordId","modelInput","modelOutput"} or
// {…,"error":{"errorCode","errorMessage"}} in reverse order, is written to
// {output s3Uri}{job id}/{input name}.out with manifest.json.out beside it.
// HoldBatches and ExpireBatches decide when jobs end, as for the other
// batch APIs; a stopped or expired job answers its first half.
type bedrockBatchFormat struct{}

const (
	bedrockJobPath  = "/model-invocation-job"
	bedrockJobsPath = "/model-invocation-jobs"
	// bedrockMinRecords is the fewest records a job takes.
	bedrockMinRecords = 100
)

func (bedrockBatchFormat) name() string { return "bedrock_batch" }

func (bedrockBatchFormat) route(r *http.Request) routing {
	p := r.URL.EscapedPath()
	switch {
	case p == bedrockJobPath:
		if r.Method == http.MethodPost {
			return served
		}
		return owned
	case p == bedrockJobsPath:
		if r.Method == http.MethodGet {
			return served
		}
		return owned
	case strings.HasPrefix(p, bedrockJobPath+"/"):
		id, op, _ := strings.Cut(strings.TrimPrefix(p, bedrockJobPath+"/"), "/")
		if id != "" && (op == "" && r.Method == http.MethodGet || op == "stop" && r.Method == http.MethodPost) {
			return served
		}
		return owned
	}
	return notMine
}

func (bedrockBatchFormat) headers(h http.Header, id string) { bedrockFormat{}.headers(h, id) }

func (bedrockBatchFormat) authorized(r *http.Request, want string) bool {
	return bedrockFormat{}.authorized(r, want)
}

func (bedrockBatchFormat) model(_ *http.Request, body []byte) string {
	return gjson.GetBytes(body, "modelId").Str
}

func (bedrockBatchFormat) fail(w http.ResponseWriter, r *http.Request, f fault) {
	bedrockFormat{}.fail(w, r, f)
}

// bedrockJob is a model invocation job of the fake.
type bedrockJob struct {
	arn, name, model, role, token string
	inURI, outURI                 string
	status, message               string
	submitted, ended              time.Time
}

type bedrockJobStore struct {
	mu    sync.Mutex
	jobs  map[string]*bedrockJob // by ARN
	order []string
}

func (s *Server) bedrockJobs() *bedrockJobStore {
	s.bjOnce.Do(func() { s.bjAPI = &bedrockJobStore{jobs: map[string]*bedrockJob{}} })
	return s.bjAPI
}

// BedrockJobsCreated is how many model invocation jobs the fake created.
func (s *Server) BedrockJobsCreated() int {
	st := s.bedrockJobs()
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.order)
}

var (
	bedrockJobName = regexp.MustCompile(`^[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9+\-.]){0,63}$`)
	bedrockRoleARN = regexp.MustCompile(`^arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+$`)
)

func (f bedrockBatchFormat) serve(c *call) {
	if !bedrockAuth(c) {
		return
	}
	st := c.s.bedrockJobs()
	p := c.r.URL.EscapedPath()
	switch p {
	case bedrockJobPath:
		f.create(c, st)
	case bedrockJobsPath:
		f.list(c, st)
	default:
		esc, op, _ := strings.Cut(strings.TrimPrefix(p, bedrockJobPath+"/"), "/")
		arn, _ := url.PathUnescape(esc)
		st.mu.Lock()
		defer st.mu.Unlock()
		j := st.jobs[arn]
		if j == nil {
			bedrockError(c.w, http.StatusNotFound, "ResourceNotFoundException", "The specified job "+arn+" could not be found.")
			return
		}
		if op == "stop" {
			if !j.running() {
				bedrockError(c.w, http.StatusBadRequest, "ValidationException", "The job cannot be stopped in status "+j.status+".")
				return
			}
			c.s.endBedrockJob(j, "Stopped")
			writeJSON(c.w, http.StatusOK, []byte(`{}`))
			return
		}
		c.s.batchHoldMu.Lock()
		hold := c.s.batchHold
		c.s.batchHoldMu.Unlock()
		if j.running() && !hold {
			c.s.endBedrockJob(j, "Completed")
		}
		writeJSON(c.w, http.StatusOK, j.object())
	}
}

func (f bedrockBatchFormat) create(c *call, st *bedrockJobStore) {
	if ct := c.r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		bedrockError(c.w, http.StatusBadRequest, "SerializationException", "Content-Type must be application/json")
		return
	}
	if !validJSON(c.body) {
		bedrockError(c.w, http.StatusBadRequest, "SerializationException", msgUnreadable)
		return
	}
	q := gjson.GetManyBytes(c.body, "jobName", "roleArn", "modelId", "clientRequestToken",
		"inputDataConfig.s3InputDataConfig.s3Uri", "outputDataConfig.s3OutputDataConfig.s3Uri", "inputDataConfig.s3InputDataConfig.s3InputFormat")
	switch {
	case !bedrockJobName.MatchString(q[0].Str):
		bedrockError(c.w, http.StatusBadRequest, "ValidationException", "1 validation error detected: Value at 'jobName' failed to satisfy constraint")
	case !bedrockRoleARN.MatchString(q[1].Str):
		bedrockError(c.w, http.StatusBadRequest, "ValidationException", "1 validation error detected: Value at 'roleArn' failed to satisfy constraint")
	case q[2].Str == "":
		bedrockError(c.w, http.StatusBadRequest, "ValidationException", "1 validation error detected: Value at 'modelId' failed to satisfy constraint")
	case !strings.HasPrefix(q[4].Str, "s3://") || !strings.HasPrefix(q[5].Str, "s3://"):
		bedrockError(c.w, http.StatusBadRequest, "ValidationException", "inputDataConfig and outputDataConfig need S3 URIs")
	case q[6].Exists() && q[6].Str != "JSONL":
		bedrockError(c.w, http.StatusBadRequest, "ValidationException", "s3InputFormat must be JSONL")
	default:
		st.mu.Lock()
		defer st.mu.Unlock()
		if q[3].Str != "" {
			for _, arn := range st.order {
				if st.jobs[arn].token == q[3].Str {
					writeJSONArn(c.w, arn)
					return
				}
			}
		}
		id := fmt.Sprintf("bj%010d", len(st.order)+1)
		j := &bedrockJob{arn: "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/" + id,
			name: q[0].Str, role: q[1].Str, model: q[2].Str, token: q[3].Str,
			inURI: q[4].Str, outURI: q[5].Str, status: "Submitted", submitted: time.Now().UTC()}
		st.jobs[j.arn] = j
		st.order = append(st.order, j.arn)
		writeJSONArn(c.w, j.arn)
	}
}

func writeJSONArn(w http.ResponseWriter, arn string) {
	writeJSON(w, http.StatusOK, append(appendString([]byte(`{"jobArn":`), arn), '}'))
}

func (f bedrockBatchFormat) list(c *call, st *bedrockJobStore) {
	q := c.r.URL.Query()
	size, _ := strconv.Atoi(q.Get("maxResults"))
	if size <= 0 || size > 1000 {
		size = 1000
	}
	from, _ := strconv.Atoi(q.Get("nextToken"))
	st.mu.Lock()
	defer st.mu.Unlock()
	b := []byte(`{"invocationJobSummaries":[`)
	n, i := 0, len(st.order)-1
	for skipped := 0; i >= 0 && n < size; i-- {
		j := st.jobs[st.order[i]]
		if !strings.Contains(j.name, q.Get("nameContains")) {
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
		b = fmt.Appendf(b, `,"nextToken":"%d"`, from+n)
	}
	writeJSON(c.w, http.StatusOK, append(b, '}'))
}

func (j *bedrockJob) running() bool {
	switch j.status {
	case "Submitted", "Validating", "Scheduled", "InProgress", "Stopping":
		return true
	}
	return false
}

func (j *bedrockJob) object() []byte {
	b := []byte(`{"jobArn":`)
	b = appendString(b, j.arn)
	b = append(b, `,"jobName":`...)
	b = appendString(b, j.name)
	b = append(b, `,"modelId":`...)
	b = appendString(b, j.model)
	b = append(b, `,"roleArn":`...)
	b = appendString(b, j.role)
	b = append(b, `,"status":`...)
	b = appendString(b, j.status)
	if j.message != "" {
		b = append(b, `,"message":`...)
		b = appendString(b, j.message)
	}
	if j.token != "" {
		b = append(b, `,"clientRequestToken":`...)
		b = appendString(b, j.token)
	}
	b = fmt.Appendf(b, `,"submitTime":%q,"lastModifiedTime":%q`, j.submitted.Format(time.RFC3339Nano), time.Now().UTC().Format(time.RFC3339Nano))
	if !j.ended.IsZero() {
		b = fmt.Appendf(b, `,"endTime":%q`, j.ended.Format(time.RFC3339Nano))
	}
	b = append(b, `,"inputDataConfig":{"s3InputDataConfig":{"s3InputFormat":"JSONL","s3Uri":`...)
	b = appendString(b, j.inURI)
	b = append(b, `}},"outputDataConfig":{"s3OutputDataConfig":{"s3Uri":`...)
	b = appendString(b, j.outURI)
	return append(b, `}}}`...)
}

// splitS3 reads s3://bucket/key.
func splitS3(uri string) (bucket, key string) {
	bucket, key, _ = strings.Cut(strings.TrimPrefix(uri, "s3://"), "/")
	return bucket, key
}

// endBedrockJob runs the job's records (all of them, or the first half
// when it is stopped or expires), writes its output and ends it in
// status.
func (s *Server) endBedrockJob(j *bedrockJob, status string) {
	j.ended = time.Now().UTC()
	fail := func(msg string) { j.status, j.message = "Failed", msg }
	if s.opts.Objects == nil {
		fail("the fake has no object store (Options.Objects)")
		return
	}
	inBucket, inKey := splitS3(j.inURI)
	input, err := s.opts.Objects.Get(inBucket, inKey)
	if err != nil {
		fail("The input file " + j.inURI + " could not be read: " + err.Error())
		return
	}
	var records [][]byte
	for line := range bytes.SplitSeq(input, []byte("\n")) {
		if line = bytes.TrimSpace(line); len(line) > 0 {
			records = append(records, line)
		}
	}
	if len(records) < bedrockMinRecords {
		fail(fmt.Sprintf("The input has %d records; a batch inference job needs at least %d.", len(records), bedrockMinRecords))
		return
	}
	n := len(records)
	if status != "Completed" {
		n /= 2
	}
	var out []byte
	ok, failed, inTokens, outTokens := 0, 0, int64(0), int64(0)
	for i := n - 1; i >= 0; i-- {
		r := gjson.ParseBytes(records[i])
		in := r.Get("modelInput")
		out = append(out, `{"recordId":`...)
		out = appendString(out, r.Get("recordId").Str)
		out = append(out, `,"modelInput":`...)
		if !validJSON(records[i]) || !in.IsObject() {
			out = append(out, `{},"error":{"errorCode":400,"errorMessage":"Malformed input record: modelInput must be a JSON object."}}`+"\n"...)
			failed++
			continue
		}
		out = append(out, compactJSON([]byte(in.Raw))...)
		status, body := s.bedrockInvoke(j.model, []byte(in.Raw))
		if status == http.StatusOK {
			out = append(out, `,"modelOutput":`...)
			out = append(out, compactJSON(body)...)
			ok++
			inTokens += gjson.GetBytes(body, "usage.input_tokens").Int()
			outTokens += gjson.GetBytes(body, "usage.output_tokens").Int()
		} else {
			out = fmt.Appendf(out, `,"error":{"errorCode":%d,"errorMessage":`, status)
			out = appendString(out, gjson.GetBytes(body, "message").Str)
			out = append(out, '}')
			failed++
		}
		out = append(out, "}\n"...)
	}
	outBucket, outKey := splitS3(j.outURI)
	if outKey != "" && !strings.HasSuffix(outKey, "/") {
		outKey += "/"
	}
	dir := outKey + j.arn[strings.LastIndexByte(j.arn, '/')+1:] + "/"
	name := inKey[strings.LastIndexByte(inKey, '/')+1:]
	manifest := fmt.Appendf(nil, `{"totalRecordCount":%d,"processedRecordCount":%d,"successRecordCount":%d,"errorRecordCount":%d,"inputTokenCount":%d,"outputTokenCount":%d}`,
		len(records), n, ok, failed, inTokens, outTokens)
	if err := s.opts.Objects.Put(outBucket, dir+name+".out", out); err != nil {
		fail("The output could not be written to " + j.outURI + ": " + err.Error())
		return
	}
	if err := s.opts.Objects.Put(outBucket, dir+"manifest.json.out", manifest); err != nil {
		fail("The output could not be written to " + j.outURI + ": " + err.Error())
		return
	}
	j.status = status
	if status == "Completed" && failed > 0 {
		j.status = "PartiallyCompleted"
	}
}

// bedrockInvoke answers an InvokeModel body for model as the fake answers
// InvokeModel, without the request's signature (the job's role made the
// call).
func (s *Server) bedrockInvoke(model string, body []byte) (int, []byte) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/model/"+url.PathEscape(model)+"/invoke", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	c := &call{s: s, f: bedrockFormat{}, w: rec, r: r, body: body, model: model, id: strconv.FormatInt(s.seq.Add(1), 10)}
	if !isBedrockClaude(model) {
		bedrockError(rec, http.StatusBadRequest, "ValidationException", "The model "+model+" does not support batch inference in this fake.")
		return rec.Code, rec.Body.Bytes()
	}
	serveBedrockMessages(c, false)
	return rec.Code, rec.Body.Bytes()
}
