package vertex

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Batches is Vertex AI's batch prediction as the batch engine's NativeAPI,
// for Google's Gemini models and Anthropic's Claude models. A unified chat
// line becomes, for Gemini, a line {"request": GenerateContentRequest}
// translated as a live chat request is, its key in the request's labels
// (KeyLabel), which the output echoes; for Claude, a line {"custom_id",
// "request"} whose request is the rawPredict body (Anthropic's Messages
// body, anthropic_version vertex-2023-10-16, no model). The part's lines
// go to Cloud Storage (Bucket, under Prefix) as one JSONL object, a batch
// prediction job of the project and location of Chat.Google reads them
// and writes its prediction files beside them; each output line's
// response becomes a chat.completion again, its status (an error) the
// unified error.
//
// Two services carry its requests: Control, Vertex AI itself, below the
// provider's base URL (https://{location}-aiplatform.googleapis.com/v1),
// and Storage, Cloud Storage's JSON API (https://storage.googleapis.com,
// paths /storage/v1/… and /upload/storage/v1/…). Both take the same
// Google access token (scope cloud-platform).
type Batches struct {
	// Control carries the batch prediction job requests.
	Control providers.Send
	// Storage carries the Cloud Storage requests.
	Storage providers.Send

	// Bucket is the Cloud Storage bucket of inputs and outputs; Prefix
	// the object prefix under it (no leading or trailing slash; may be
	// empty).
	Bucket, Prefix string

	// Chat translates the requests and the answers; Chat.Google names
	// the project and location of the jobs.
	Chat Chat
}

// KeyLabel is the label of each request that carries its key.
const KeyLabel = "modelgate_key"

// Limits per job: Vertex AI's 200,000 requests and 1 GB of input. Only
// chat has batches, on a project (express mode has none).
func (b Batches) Limits(endpoint string) batch.NativeLimits {
	if endpoint != batch.EndpointChat || b.Chat.Google.Project == "" {
		return batch.NativeLimits{}
	}
	return batch.NativeLimits{MaxRequests: 200_000, MaxBytes: 1_000_000_000}
}

// publisherModel is the job's model resource: publishers/google/models/
// {name} for a Gemini model, publishers/anthropic/models/{name} for
// Claude. Endpoints and other publishers' models have none here.
func publisherModel(model string) (string, bool) {
	if name, claude := Claude(model); claude {
		if name == "" || strings.Contains(name, "/") {
			return "", false
		}
		return anthropicPrefix + name, true
	}
	name := strings.TrimPrefix(strings.TrimPrefix(model, "publishers/google/models/"), "models/")
	if name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return "publishers/google/models/" + name, true
}

// Encode writes one line: {"request": GenerateContentRequest}, the key in
// the request's labels, or Claude's {"custom_id","request"}.
func (b Batches) Encode(_, key string, body []byte, model string) ([]byte, error) {
	if _, ok := publisherModel(model); !ok {
		return nil, providers.UnsupportedBecause("model", "Vertex AI batch prediction is used for Google's and Anthropic's publisher models only")
	}
	if name, claude := Claude(model); claude {
		return b.encodeClaude(key, body, name)
	}
	req, err := b.Chat.Google.ChatRequest(body, model)
	if err != nil {
		return nil, err
	}
	w := jsonw.New(make([]byte, 0, len(req.Body)+64))
	o := w.Object()
	r := o.Object("request")
	providers.EachMember(providers.InPlace(req.Body), func(k string, v gjson.Result) bool {
		if k != "labels" {
			r.Key(k).Compact(v.Raw)
		}
		return true
	})
	l := r.Object("labels")
	gjson.GetBytes(req.Body, "labels").ForEach(func(k, v gjson.Result) bool {
		if k.Str != KeyLabel {
			l.Key(k.Str).Compact(v.Raw)
		}
		return true
	})
	l.Str(KeyLabel, key)
	l.End()
	r.End()
	o.End()
	return w.Finish()
}

// encodeClaude writes Claude's line: {"custom_id","request"}, the request
// the rawPredict body of the chat line. A line that needs a beta, which
// rawPredict takes in a header that a batch has not, is refused: it runs
// in the gateway.
func (b Batches) encodeClaude(key string, body []byte, model string) ([]byte, error) {
	if b.Chat.Claude.Project == "" {
		return nil, noProject(model)
	}
	req, err := b.Chat.Claude.ChatRequest(body, model)
	if err != nil {
		return nil, err
	}
	if len(req.Header.Values("Anthropic-Beta")) > 0 {
		return nil, providers.UnsupportedBecause("model", "this request needs an Anthropic beta, which Vertex AI batch prediction cannot send")
	}
	w := jsonw.New(make([]byte, 0, len(req.Body)+48))
	o := w.Object()
	o.Str("custom_id", key)
	o.Raw("request", string(req.Body))
	o.End()
	return w.Finish()
}

// dir is the object prefix of one part's objects.
func (b Batches) dir(marker string) string {
	if b.Prefix == "" {
		return marker + "/"
	}
	return b.Prefix + "/" + marker + "/"
}

// parent is the collection of the jobs.
func (b Batches) parent() string {
	loc := b.Chat.Google.Location
	if loc == "" {
		loc = "global"
	}
	return "/projects/" + url.PathEscape(b.Chat.Google.Project) + "/locations/" + url.PathEscape(loc) + "/batchPredictionJobs"
}

// Submit writes the lines to gs://Bucket/Prefix/<marker>/requests.jsonl,
// streamed, and creates a job named (displayName) after the marker that
// writes its output under …/<marker>/out.
func (b Batches) Submit(ctx context.Context, s *batch.NativeSubmission) (batch.NativeRef, error) {
	if s.Count == 0 {
		return batch.NativeRef{}, errors.New("no requests to submit")
	}
	model, ok := publisherModel(s.Model)
	if !ok || b.Chat.Google.Project == "" {
		return batch.NativeRef{}, &batch.NativeRefusal{Status: http.StatusBadRequest, Message: "Vertex AI batch prediction takes publisher models on a project"}
	}
	if b.Bucket == "" {
		return batch.NativeRef{}, &batch.NativeRefusal{Status: http.StatusBadRequest, Message: "Vertex AI batch prediction needs a bucket (batch_bucket)"}
	}
	dir := b.dir(s.Marker)
	if err := b.upload(ctx, dir+"requests.jsonl", s); err != nil {
		return batch.NativeRef{}, err
	}
	w := jsonw.New(nil)
	o := w.Object()
	o.Str("displayName", s.Marker)
	o.Str("model", model)
	in := o.Object("inputConfig")
	in.Str("instancesFormat", "jsonl")
	src := in.Object("gcsSource")
	uris := src.Array("uris")
	uris.Str("gs://" + b.Bucket + "/" + dir + "requests.jsonl")
	uris.End()
	src.End()
	in.End()
	out := o.Object("outputConfig")
	out.Str("predictionsFormat", "jsonl")
	dst := out.Object("gcsDestination")
	dst.Str("outputUriPrefix", "gs://"+b.Bucket+"/"+dir+"out")
	dst.End()
	out.End()
	o.End()
	body, err := w.Finish()
	if err != nil {
		return batch.NativeRef{}, err
	}
	got, err := b.control(ctx, providers.Request{Method: http.MethodPost, Path: b.parent(), Body: body, Header: jsonHeader})
	if err != nil {
		return batch.NativeRef{}, err
	}
	name := gjson.GetBytes(got, "name").Str
	if _, err := jobPath(name); err != nil {
		return batch.NativeRef{}, errors.New("the provider created a job without a name")
	}
	return batch.NativeRef{ID: name}, nil
}

var jsonHeader = http.Header{"Content-Type": {"application/json"}}

// upload writes the lines as one object (a media upload), streamed.
func (b Batches) upload(ctx context.Context, object string, s *batch.NativeSubmission) error {
	records := s.Records()
	defer func() { _ = records.Close() }() // read only
	ans, err := b.Storage(ctx, providers.Request{Method: http.MethodPost, Path: "/upload/storage/v1/b/" + url.PathEscape(b.Bucket) + "/o",
		Query:  url.Values{"uploadType": {"media"}, "name": {object}}.Encode(),
		Header: http.Header{"Content-Type": {"application/jsonl"}}, Upload: records, Length: s.Bytes})
	if err != nil {
		return err
	}
	_, err = b.read(ans)
	return err
}

// Find lists the jobs whose display name is the marker.
func (b Batches) Find(ctx context.Context, s *batch.NativeSubmission) (batch.NativeRef, bool, error) {
	token := ""
	for range 100 {
		q := url.Values{"filter": {`display_name="` + s.Marker + `"`}, "pageSize": {"100"}}
		if token != "" {
			q.Set("pageToken", token)
		}
		got, err := b.control(ctx, providers.Request{Method: http.MethodGet, Path: b.parent(), Query: q.Encode()})
		if err != nil {
			return batch.NativeRef{}, false, err
		}
		for _, j := range gjson.GetBytes(got, "batchPredictionJobs").Array() {
			if j.Get("displayName").Str == s.Marker && j.Get("name").Str != "" {
				return batch.NativeRef{ID: j.Get("name").Str}, true, nil
			}
		}
		if token = gjson.GetBytes(got, "nextPageToken").Str; token == "" {
			return batch.NativeRef{}, false, nil
		}
	}
	return batch.NativeRef{}, false, errors.New("too many jobs to look through")
}

// jobPath is the path of a job's name,
// projects/{p}/locations/{l}/batchPredictionJobs/{id}.
func jobPath(name string) (string, error) {
	seg := strings.Split(name, "/")
	ok := len(seg) == 6 && seg[0] == "projects" && seg[2] == "locations" && seg[4] == "batchPredictionJobs"
	for _, s := range seg {
		ok = ok && s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "?#%:")
	}
	if !ok {
		return "", fmt.Errorf("%q is not a batch prediction job's name", name)
	}
	return "/" + name, nil
}

// Poll reads the job; its output directory, once it has one, rides along
// in the reference.
func (b Batches) Poll(ctx context.Context, ref batch.NativeRef) (batch.NativeStatus, error) {
	got, err := b.job(ctx, ref)
	if err != nil {
		return batch.NativeStatus{}, err
	}
	f := gjson.GetManyBytes(got, "state", "completionStats.successfulCount", "completionStats.failedCount", "error.message", "outputInfo.gcsOutputDirectory")
	st := batch.NativeStatus{Completed: int(f[1].Int()), Failed: int(f[2].Int())}
	switch s := f[0].Str; s {
	case "JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_CANCELLING", "JOB_STATE_PAUSED", "JOB_STATE_UPDATING", "JOB_STATE_UNSPECIFIED", "":
		st.State = batch.NativeRunning
	case "JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED":
		st.State = batch.NativeCompleted
	case "JOB_STATE_CANCELLED":
		st.State = batch.NativeCancelled
	case "JOB_STATE_EXPIRED":
		st.State = batch.NativeExpired
	case "JOB_STATE_FAILED":
		st.State, st.Message = batch.NativeFailed, f[3].Str
		if st.Message == "" {
			st.Message = "the provider failed the job"
		}
	default:
		return st, fmt.Errorf("the provider's job has the unknown state %q", s)
	}
	if f[4].Str != "" && ref.Data["output"] != f[4].Str {
		st.Ref = batch.NativeRef{ID: ref.ID, Data: map[string]string{"output": f[4].Str}}
	}
	return st, nil
}

func (b Batches) job(ctx context.Context, ref batch.NativeRef) ([]byte, error) {
	path, err := jobPath(ref.ID)
	if err != nil {
		return nil, err
	}
	return b.control(ctx, providers.Request{Method: http.MethodGet, Path: path})
}

// Results streams the job's prediction files (JSONL, in no order): the
// objects named predictions*.jsonl in its output directory. A job
// cancelled or expired before it had one has none.
func (b Batches) Results(ctx context.Context, ref batch.NativeRef, st batch.NativeStatus, each func(batch.NativeResult) error) error {
	dir := ref.Data["output"]
	if st.Ref.ID != "" && st.Ref.Data["output"] != "" {
		dir = st.Ref.Data["output"]
	}
	if dir == "" {
		got, err := b.job(ctx, ref)
		if err != nil {
			return err
		}
		dir = gjson.GetBytes(got, "outputInfo.gcsOutputDirectory").Str
	}
	if dir == "" {
		if st.State == batch.NativeCompleted {
			return fmt.Errorf("job %s ended without an output directory", ref.ID)
		}
		return nil
	}
	bucket, prefix, ok := strings.Cut(strings.TrimPrefix(dir, "gs://"), "/")
	if !strings.HasPrefix(dir, "gs://") || !ok || bucket == "" {
		return fmt.Errorf("job %s has the output directory %q, not a gs:// URI", ref.ID, dir)
	}
	files, err := b.list(ctx, bucket, prefix+"/")
	if err != nil {
		return err
	}
	if len(files) == 0 && st.State == batch.NativeCompleted {
		return fmt.Errorf("job %s wrote no predictions", ref.ID)
	}
	for _, name := range files {
		if err := b.readFile(ctx, bucket, name, each); err != nil {
			return err
		}
	}
	return nil
}

// list returns the prediction files under prefix.
func (b Batches) list(ctx context.Context, bucket, prefix string) ([]string, error) {
	var files []string
	token := ""
	for range 100 {
		q := url.Values{"prefix": {prefix}}
		if token != "" {
			q.Set("pageToken", token)
		}
		ans, err := b.Storage(ctx, providers.Request{Method: http.MethodGet, Path: "/storage/v1/b/" + url.PathEscape(bucket) + "/o", Query: q.Encode()})
		if err != nil {
			return nil, err
		}
		got, err := b.read(ans)
		if err != nil {
			return nil, err
		}
		for _, it := range gjson.GetBytes(got, "items").Array() {
			name := it.Get("name").Str
			base := name[strings.LastIndexByte(name, '/')+1:]
			if strings.HasPrefix(base, "predictions") && strings.HasSuffix(base, ".jsonl") {
				files = append(files, name)
			}
		}
		if token = gjson.GetBytes(got, "nextPageToken").Str; token == "" {
			return files, nil
		}
	}
	return nil, errors.New("too many output files to look through")
}

// readFile streams one prediction file.
func (b Batches) readFile(ctx context.Context, bucket, name string, each func(batch.NativeResult) error) error {
	ans, err := b.Storage(ctx, providers.Request{Method: http.MethodGet,
		Path: "/storage/v1/b/" + url.PathEscape(bucket) + "/o/" + url.PathEscape(name), Query: "alt=media"})
	if err != nil {
		return err
	}
	defer func() { _ = ans.Body.Close() }()
	if ans.Status != http.StatusOK {
		_, err := b.read(ans)
		return err
	}
	br := bufio.NewReaderSize(ans.Body, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			if perr := each(b.ResultLine(line)); perr != nil {
				return perr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ResultLine reads one output line into a unified result: its response,
// a GenerateContentResponse, becomes a chat.completion; its status, an
// error's text (often "<reason>: " and Google's error JSON), the unified
// error. The key is the request's label.
func (b Batches) ResultLine(line []byte) batch.NativeResult {
	if !providers.ValidJSON(line) {
		return batch.NativeResult{Code: "result_missing", Message: "The provider's result for this request could not be read."}
	}
	f := gjson.GetManyBytes(line, "request.labels."+KeyLabel, "response", "status", "custom_id", "result")
	res := batch.NativeResult{Key: f[0].Str}
	if f[3].Type == gjson.String {
		res.Key = f[3].Str
	}
	if r := f[4]; r.IsObject() && !f[1].Exists() {
		// Anthropic's own result shape: {"type":"succeeded","message"}
		// or {"type":"errored","error"}.
		switch r.Get("type").Str {
		case "succeeded":
			f[1] = r.Get("message")
		case "errored":
			e := r.Get("error")
			if e.Get("error").IsObject() {
				e = e.Get("error") // {"type":"error","error":{…}}
			}
			pe := b.Chat.Claude.Error(claudeStatus(e.Get("type").Str), nil, []byte(`{"type":"error","error":`+e.Raw+`}`))
			res.Status, res.Body = pe.Status, pe.JSON()
			return res
		}
	}
	switch {
	case f[1].IsObject() && f[2].Str == "":
		body, _, err := b.Chat.ChatResponse([]byte(f[1].Raw))
		if err != nil {
			e := &providers.Error{Status: http.StatusBadGateway, Type: "server_error", Message: "the provider's answer could not be read"}
			res.Status, res.Body = e.Status, e.JSON()
			return res
		}
		res.Status, res.Body, res.RequestID = http.StatusOK, body, f[1].Get("responseId").Str
		if res.RequestID == "" {
			res.RequestID = f[1].Get("id").Str // Claude's message
		}
	case f[2].Type == gjson.String && f[2].Str != "":
		e := b.statusError(f[2].Str)
		res.Status, res.Body = e.Status, e.JSON()
	default:
		res.Code, res.Message = "result_missing", "The provider's result for this request could not be read."
	}
	return res
}

// claudeStatus is the status Anthropic answers an error type with.
func claudeStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "overloaded_error":
		return 529
	}
	return http.StatusInternalServerError
}

// statusError is the unified error of an output line's status: Google's
// error JSON ({"error":{"code","message"}}) or Anthropic's
// ({"type":"error","error":{"type","message"}}) when the text holds one,
// else a 500 with the text.
func (b Batches) statusError(text string) *providers.Error {
	if i := strings.IndexByte(text, '{'); i >= 0 && providers.ValidJSON([]byte(text[i:])) {
		e := gjson.Get(text[i:], "error")
		if code := int(e.Get("code").Int()); code >= 400 && code <= 599 && e.Get("message").Str != "" {
			return &providers.Error{Status: code, Type: providers.TypeForStatus(code), Message: e.Get("message").Str}
		}
		if typ := e.Get("type").Str; typ != "" && e.Get("message").Str != "" {
			return b.Chat.Claude.Error(claudeStatus(typ), nil, []byte(text[i:]))
		}
	}
	if len(text) > 2048 {
		text = text[:2048]
	}
	return &providers.Error{Status: http.StatusInternalServerError, Type: "server_error", Message: text}
}

// Cancel asks for the job to be cancelled.
func (b Batches) Cancel(ctx context.Context, ref batch.NativeRef) error {
	path, err := jobPath(ref.ID)
	if err != nil {
		return err
	}
	_, err = b.control(ctx, providers.Request{Method: http.MethodPost, Path: path + ":cancel"})
	return err
}

func (b Batches) control(ctx context.Context, req providers.Request) ([]byte, error) {
	ans, err := b.Control(ctx, req)
	if err != nil {
		return nil, err
	}
	return b.read(ans)
}

// read reads an answer, a failure as an error: a definite refusal for a
// 4xx other than 408, 409 and 429.
func (b Batches) read(ans providers.Answer) ([]byte, error) {
	defer func() { _ = ans.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(ans.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if ans.Status >= 200 && ans.Status <= 299 {
		return body, nil
	}
	msg := gjson.GetBytes(body, "error.message").Str
	if ans.Status >= 400 && ans.Status < 500 && ans.Status != 408 && ans.Status != 409 && ans.Status != 429 {
		return nil, &batch.NativeRefusal{Status: ans.Status, Message: msg}
	}
	return nil, fmt.Errorf("the provider answered %d: %s", ans.Status, msg)
}

var _ batch.NativeAPI = Batches{}

// ParseGCSURI reads gs://bucket[/prefix], as the batch_bucket option gives
// it: a bucket name as Cloud Storage names buckets (3 to 63 characters of
// lower-case letters, digits, '-', '_' and '.', up to 222 with dots,
// starting and ending with a letter or digit), and an object prefix of
// non-empty segments of letters, digits and !-_.*'(), none "." or "..". A
// trailing slash is dropped.
func ParseGCSURI(uri string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(uri, "gs://")
	if !ok {
		return "", "", fmt.Errorf("%q is not a Cloud Storage URI (gs://bucket/prefix)", uri)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.TrimSuffix(prefix, "/")
	if !validBucket(bucket) {
		return "", "", fmt.Errorf("%q is not a Cloud Storage bucket name", bucket)
	}
	if !providers.ValidObjectPrefix(prefix) {
		return "", "", fmt.Errorf("the object prefix %q of %q: use segments of letters, digits and !-_.*'()", prefix, uri)
	}
	return bucket, prefix, nil
}

func validBucket(b string) bool {
	limit := 63
	if strings.Contains(b, ".") {
		limit = 222
	}
	if len(b) < 3 || len(b) > limit || strings.Contains(b, "..") {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		alnum := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || i == len(b)-1 || c != '.' && c != '-' && c != '_') {
			return false
		}
	}
	return true
}
