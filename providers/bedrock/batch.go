package bedrock

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Batches is Bedrock batch inference as the batch engine's NativeAPI, for
// Anthropic's Claude models: a unified chat line becomes a record
// {"recordId","modelInput"} whose modelInput is the InvokeModel body,
// Anthropic's Messages body translated as a live chat request is
// (Chat) and made Bedrock's as Messages makes it. The part's records go
// to S3 (Bucket, under Prefix) as one JSONL object, a model invocation
// job reads them with the service role RoleARN and writes its output
// beside them; each output record's modelOutput, Anthropic's message,
// becomes a chat.completion again.
//
// Two services carry its requests: Control, the Bedrock control plane
// (https://bedrock.{region}.amazonaws.com, SigV4 service "bedrock"), and
// Storage, the bucket (https://{bucket}.s3.{region}.amazonaws.com, or
// any base URL under which "/{key}" names an object of the bucket; SigV4
// service "s3"). Both are the host's, with its credentials.
type Batches struct {
	// Control carries the model invocation job requests.
	Control providers.Send
	// Storage carries the object requests: PUT and GET of Path
	// "/{key}", the key escaped segment by segment.
	Storage providers.Send

	// Bucket is the S3 bucket of inputs and outputs; Prefix the key
	// prefix under it (no leading or trailing slash; may be empty).
	Bucket, Prefix string
	// RoleARN is the service role Bedrock assumes to read the input and
	// write the output (arn:aws:iam::<account>:role/<name>).
	RoleARN string

	// Chat translates a chat request into Anthropic's Messages body and
	// Claude's answer back, as for Anthropic's own API.
	Chat anthropic.Chat
	// Messages makes that body Bedrock's InvokeModel body.
	Messages Messages
}

// Limits per job: Bedrock's 100 to 50,000 records and 1 GB of input.
// Only chat has batches.
func (b Batches) Limits(endpoint string) batch.NativeLimits {
	if endpoint != batch.EndpointChat {
		return batch.NativeLimits{}
	}
	return batch.NativeLimits{MinRequests: 100, MaxRequests: 50_000, MaxBytes: 1_000_000_000}
}

// Encode writes one record: {"recordId","modelInput"}. Models other than
// Claude get an error: their lines run in the gateway.
func (b Batches) Encode(_, key string, body []byte, model string) ([]byte, error) {
	if baseFamily(b.Messages.BaseModels, model).provider != "anthropic" {
		return nil, providers.UnsupportedBecause("model", "Bedrock batch inference is used for Claude models only")
	}
	// The translator learns Claude's features from the model's name: for
	// an id that does not say which model it is, the base model's.
	named := model
	if base, ok := b.Messages.BaseModels[model]; ok {
		named = base
	}
	req, err := b.Chat.ChatRequest(body, named)
	if err != nil {
		return nil, err
	}
	inv, err := b.Messages.NativeRequest("/messages", req.Body, model, req.Header)
	if err != nil {
		return nil, err
	}
	w := jsonw.New(make([]byte, 0, len(inv.Body)+48))
	o := w.Object()
	o.Str("recordId", key)
	o.Raw("modelInput", string(inv.Body))
	o.End()
	return w.Finish()
}

// inputName is the name of a job's input object; Bedrock names its output
// after it, with ".out".
const inputName = "records.jsonl"

// dir is the key prefix of one part's objects.
func (b Batches) dir(marker string) string {
	if b.Prefix == "" {
		return marker + "/"
	}
	return b.Prefix + "/" + marker + "/"
}

// Submit writes the records to s3://Bucket/Prefix/<marker>/records.jsonl,
// streamed, and creates a job named after the marker that writes its
// output under …/<marker>/out/. The marker is also the job's
// clientRequestToken: Bedrock creates one job per token.
func (b Batches) Submit(ctx context.Context, s *batch.NativeSubmission) (batch.NativeRef, error) {
	if s.Count == 0 {
		return batch.NativeRef{}, errors.New("no requests to submit")
	}
	if b.Bucket == "" || b.RoleARN == "" {
		return batch.NativeRef{}, &batch.NativeRefusal{Status: http.StatusBadRequest, Message: "Bedrock batch inference needs a bucket and a service role (batch_bucket, batch_role)"}
	}
	dir := b.dir(s.Marker)
	if err := b.putRecords(ctx, dir+inputName, s); err != nil {
		return batch.NativeRef{}, err
	}
	w := jsonw.New(nil)
	o := w.Object()
	o.Str("jobName", s.Marker)
	o.Str("clientRequestToken", s.Marker)
	o.Str("roleArn", b.RoleARN)
	o.Str("modelId", s.Model)
	inCfg := o.Object("inputDataConfig")
	in := inCfg.Object("s3InputDataConfig")
	in.Str("s3Uri", b.uri(dir+inputName))
	in.Str("s3InputFormat", "JSONL")
	in.End()
	inCfg.End()
	outCfg := o.Object("outputDataConfig")
	out := outCfg.Object("s3OutputDataConfig")
	out.Str("s3Uri", b.uri(dir+"out/"))
	out.End()
	outCfg.End()
	o.End()
	body, err := w.Finish()
	if err != nil {
		return batch.NativeRef{}, err
	}
	got, err := b.control(ctx, http.MethodPost, "/model-invocation-job", "", body)
	if err != nil {
		return batch.NativeRef{}, err
	}
	arn := gjson.GetBytes(got, "jobArn").Str
	if arn == "" {
		return batch.NativeRef{}, errors.New("the provider created a job without an ARN")
	}
	return b.ref(arn, s.Marker), nil
}

// ref is the reference of job arn of the part marked marker: its output
// object's key rides along.
func (b Batches) ref(arn, marker string) batch.NativeRef {
	return batch.NativeRef{ID: arn, Data: map[string]string{"output": b.dir(marker) + "out/" + jobID(arn) + "/" + inputName + ".out"}}
}

// jobID is the last segment of a job's ARN, which Bedrock names the
// folder of its output after.
func jobID(arn string) string { return arn[strings.LastIndexByte(arn, '/')+1:] }

// uri is the S3 URI of key in the bucket.
func (b Batches) uri(key string) string { return "s3://" + b.Bucket + "/" + key }

// putRecords uploads the records as one object, streamed.
func (b Batches) putRecords(ctx context.Context, key string, s *batch.NativeSubmission) error {
	records := s.Records()
	defer func() { _ = records.Close() }() // read only
	ans, err := b.Storage(ctx, providers.Request{Method: http.MethodPut, Path: objectPath(key),
		Header: http.Header{"Content-Type": {"application/jsonl"}}, Upload: records, Length: s.Bytes})
	if err != nil {
		return err
	}
	defer func() { _ = ans.Body.Close() }()
	if ans.Status < 200 || ans.Status > 299 {
		body, _ := io.ReadAll(io.LimitReader(ans.Body, 64<<10))
		return s3Failure(ans.Status, body)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(ans.Body, 64<<10))
	return nil
}

// objectPath is the path of key: each segment escaped.
func objectPath(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/" + strings.Join(segs, "/")
}

// Find lists the jobs whose name holds the marker.
func (b Batches) Find(ctx context.Context, s *batch.NativeSubmission) (batch.NativeRef, bool, error) {
	token := ""
	for range 100 {
		q := url.Values{"nameContains": {s.Marker}, "maxResults": {"100"}}
		if token != "" {
			q.Set("nextToken", token)
		}
		got, err := b.control(ctx, http.MethodGet, "/model-invocation-jobs", q.Encode(), nil)
		if err != nil {
			return batch.NativeRef{}, false, err
		}
		for _, j := range gjson.GetBytes(got, "invocationJobSummaries").Array() {
			if j.Get("jobName").Str == s.Marker && j.Get("jobArn").Str != "" {
				return b.ref(j.Get("jobArn").Str, s.Marker), true, nil
			}
		}
		if token = gjson.GetBytes(got, "nextToken").Str; token == "" {
			return batch.NativeRef{}, false, nil
		}
	}
	return batch.NativeRef{}, false, errors.New("too many jobs to look through")
}

// Poll reads the job. Bedrock tells no counts while it runs.
func (b Batches) Poll(ctx context.Context, ref batch.NativeRef) (batch.NativeStatus, error) {
	got, err := b.control(ctx, http.MethodGet, jobPath(ref.ID), "", nil)
	if err != nil {
		return batch.NativeStatus{}, err
	}
	var st batch.NativeStatus
	switch s := gjson.GetBytes(got, "status").Str; s {
	case "Submitted", "Validating", "Scheduled", "InProgress", "Stopping", "":
		st.State = batch.NativeRunning
	case "Completed", "PartiallyCompleted":
		st.State = batch.NativeCompleted
	case "Stopped":
		st.State = batch.NativeCancelled
	case "Expired":
		st.State = batch.NativeExpired
	case "Failed":
		st.State, st.Message = batch.NativeFailed, gjson.GetBytes(got, "message").Str
		if st.Message == "" {
			st.Message = "the provider failed the job"
		}
	default:
		return st, fmt.Errorf("the provider's job has the unknown status %q", s)
	}
	return st, nil
}

// Results streams the job's output object (JSONL, in no order). A job
// stopped or expired before it wrote any has none.
func (b Batches) Results(ctx context.Context, ref batch.NativeRef, st batch.NativeStatus, each func(batch.NativeResult) error) error {
	key := ref.Data["output"]
	if key == "" {
		return fmt.Errorf("the reference of job %s names no output", ref.ID)
	}
	ans, err := b.Storage(ctx, providers.Request{Method: http.MethodGet, Path: objectPath(key)})
	if err != nil {
		return err
	}
	defer func() { _ = ans.Body.Close() }()
	if ans.Status == http.StatusNotFound && st.State != batch.NativeCompleted {
		return nil
	}
	if ans.Status != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(ans.Body, 64<<10))
		return s3Failure(ans.Status, body)
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

// ResultLine reads one output record into a unified result: modelOutput,
// Claude's message, becomes a chat.completion; error ({"errorCode",
// "errorMessage"}) the unified error of its code.
func (b Batches) ResultLine(line []byte) batch.NativeResult {
	if !providers.ValidJSON(line) {
		return batch.NativeResult{Code: "result_missing", Message: "The provider's result for this request could not be read."}
	}
	f := gjson.GetManyBytes(line, "recordId", "modelOutput", "error")
	res := batch.NativeResult{Key: f[0].Str}
	switch {
	case f[1].IsObject():
		body, _, err := b.Chat.ChatResponse([]byte(f[1].Raw))
		if err != nil {
			e := &providers.Error{Status: http.StatusBadGateway, Type: "server_error", Message: "the provider's answer could not be read"}
			res.Status, res.Body = e.Status, e.JSON()
			return res
		}
		res.Status, res.Body, res.RequestID = http.StatusOK, body, f[1].Get("id").Str
	case f[2].Exists():
		status := int(f[2].Get("errorCode").Int())
		if status < 400 || status > 599 {
			status = http.StatusInternalServerError
		}
		msg := f[2].Get("errorMessage").Str
		if msg == "" {
			msg = "the provider could not answer this request (" + providers.StatusText(status) + ")"
		}
		e := &providers.Error{Status: status, Type: providers.TypeForStatus(status), Message: msg}
		res.Status, res.Body = e.Status, e.JSON()
	default:
		res.Code, res.Message = "result_missing", "The provider's result for this request could not be read."
	}
	return res
}

// jobPath is the path of a job, its ARN escaped as the SDK escapes an
// HTTP label (':' and '/' too).
func jobPath(arn string) string {
	return string(appendEscaped([]byte("/model-invocation-job/"), arn))
}

// Cancel stops the job; what it finished is written to its output.
func (b Batches) Cancel(ctx context.Context, ref batch.NativeRef) error {
	_, err := b.control(ctx, http.MethodPost, jobPath(ref.ID)+"/stop", "", nil)
	return err
}

// control sends one control plane request and reads its answer.
func (b Batches) control(ctx context.Context, method, path, query string, body []byte) ([]byte, error) {
	req := providers.Request{Method: method, Path: path, Query: query, Body: body}
	if body != nil {
		req.Header = http.Header{"Content-Type": {"application/json"}}
	}
	ans, err := b.Control(ctx, req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = ans.Body.Close() }()
	got, err := io.ReadAll(io.LimitReader(ans.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if ans.Status < 200 || ans.Status > 299 {
		return nil, refusalOr(ans.Status, gjson.GetBytes(got, "message").Str)
	}
	return got, nil
}

// s3Failure is a failed S3 answer as an error: S3 answers in XML,
// <Error><Code>…</Code><Message>…</Message></Error>.
func s3Failure(status int, body []byte) error {
	code, msg := xmlText(body, "Code"), xmlText(body, "Message")
	if code != "" {
		msg = code + ": " + msg
	}
	return refusalOr(status, "the bucket: "+msg)
}

// xmlText is the text of the first <name> element of body, unescaped
// only of what S3 escapes in messages.
func xmlText(body []byte, name string) string {
	_, rest, ok := bytes.Cut(body, []byte("<"+name+">"))
	if !ok {
		return ""
	}
	text, _, ok := bytes.Cut(rest, []byte("</"+name+">"))
	if !ok || len(text) > 1024 {
		return ""
	}
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&quot;", `"`, "&apos;", "'", "&amp;", "&").Replace(string(text))
}

// refusalOr is a definite refusal for a 4xx other than 408, 409 and 429,
// else an error that may pass.
func refusalOr(status int, msg string) error {
	if status >= 400 && status < 500 && status != 408 && status != 409 && status != 429 {
		return &batch.NativeRefusal{Status: status, Message: msg}
	}
	return fmt.Errorf("the provider answered %d: %s", status, msg)
}

var _ batch.NativeAPI = Batches{}

// ParseS3URI reads s3://bucket[/prefix], as the batch_bucket option gives
// it: a bucket name as S3 names general purpose buckets (3 to 63
// characters of lower-case letters, digits, '.' and '-', starting and
// ending with a letter or digit), and a key prefix of non-empty segments
// of the characters S3 calls safe (letters, digits and !-_.*'()), none "."
// or "..". A trailing slash is dropped.
func ParseS3URI(uri string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%q is not an S3 URI (s3://bucket/prefix)", uri)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.TrimSuffix(prefix, "/")
	if !validBucket(bucket) {
		return "", "", fmt.Errorf("%q is not an S3 bucket name", bucket)
	}
	if !providers.ValidObjectPrefix(prefix) {
		return "", "", fmt.Errorf("the key prefix %q of %q: use segments of letters, digits and !-_.*'()", prefix, uri)
	}
	return bucket, prefix, nil
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 || strings.Contains(b, "..") {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		alnum := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || i == len(b)-1 || c != '.' && c != '-') {
			return false
		}
	}
	return true
}

// roleARN is an IAM role's ARN, as CreateModelInvocationJob takes it.
var roleARN = regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}$`)

// ValidRoleARN reports whether s is an IAM role's ARN
// (arn:aws:iam::<account>:role/<name>).
func ValidRoleARN(s string) bool { return roleARN.MatchString(s) }
