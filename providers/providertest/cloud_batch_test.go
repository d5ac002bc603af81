package providertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/tidwall/gjson"
)

// memObjects is an object store in memory.
type memObjects struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (o *memObjects) Get(bucket, key string) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.m[bucket+"/"+key]
	if !ok {
		return nil, errors.New("NoSuchKey")
	}
	return b, nil
}

func (o *memObjects) Put(bucket, key string, data []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m[bucket+"/"+key] = data
	return nil
}

// signedBedrock sends a control plane request signed for key.
func signedBedrock(t *testing.T, s *Server, method, path, body string, service string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKIDB", SecretAccessKey: "sec"}, req, hex.EncodeToString(sum[:]), service, "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	res, got := Do(t, req)
	return res.StatusCode, string(got)
}

func bedrockJobBody(name, token string) string {
	return fmt.Sprintf(`{"jobName":%q,"clientRequestToken":%q,"roleArn":"arn:aws:iam::123456789012:role/r","modelId":"anthropic.claude-haiku-4-5-20251001-v1:0",`+
		`"inputDataConfig":{"s3InputDataConfig":{"s3Uri":"s3://b/p/in.jsonl","s3InputFormat":"JSONL"}},"outputDataConfig":{"s3OutputDataConfig":{"s3Uri":"s3://b/p/out/"}}}`, name, token)
}

// TestBedrockBatch: the control plane checks the signature and its
// service, takes a clientRequestToken once, fails a job of fewer than 100
// records as Bedrock's validation does, runs one against the bucket
// (answers in reverse order, a refused record's error, a manifest), lists
// jobs by name, and stops only a running job.
func TestBedrockBatch(t *testing.T) {
	objects := &memObjects{m: map[string][]byte{}}
	s := Start(t, Options{Objects: objects, Keys: map[string]string{"bedrock_batch": "AKIDB:sec"}})
	if status, got := signedBedrock(t, s, http.MethodPost, "/model-invocation-job", bedrockJobBody("j-1", "tok-1"), "s3"); status != 403 || !strings.Contains(got, "correct service") {
		t.Errorf("signed for s3: %d %s", status, got)
	}
	status, got := signedBedrock(t, s, http.MethodPost, "/model-invocation-job", bedrockJobBody("j-1", "tok-1"), "bedrock")
	arn := gjson.Get(got, "jobArn").Str
	if status != 200 || !strings.HasPrefix(arn, "arn:aws:bedrock:") {
		t.Fatalf("create: %d %s", status, got)
	}
	if _, again := signedBedrock(t, s, http.MethodPost, "/model-invocation-job", bedrockJobBody("j-1", "tok-1"), "bedrock"); gjson.Get(again, "jobArn").Str != arn || s.BedrockJobsCreated() != 1 {
		t.Errorf("the same token made another job: %s", again)
	}
	path := "/model-invocation-job/" + strings.NewReplacer(":", "%3A", "/", "%2F").Replace(arn)
	// No input yet: the job fails.
	if _, got := signedBedrock(t, s, http.MethodGet, path, "", "bedrock"); gjson.Get(got, "status").Str != "Failed" || !strings.Contains(gjson.Get(got, "message").Str, "could not be read") {
		t.Errorf("a job without input: %s", got)
	}

	var in bytes.Buffer
	for i := range 100 {
		top := ""
		if i == 5 {
			top = `,"top_p":2`
		}
		fmt.Fprintf(&in, `{"recordId":"r%d","modelInput":{"anthropic_version":"bedrock-2023-05-31","max_tokens":10,"messages":[{"role":"user","content":"say %d"}]%s}}`+"\n", i, i, top)
	}
	_ = objects.Put("b", "p/in.jsonl", in.Bytes())
	s.HoldBatches(true)
	_, got = signedBedrock(t, s, http.MethodPost, "/model-invocation-job", bedrockJobBody("j-2", "tok-2"), "bedrock")
	arn2 := gjson.Get(got, "jobArn").Str
	path2 := "/model-invocation-job/" + strings.NewReplacer(":", "%3A", "/", "%2F").Replace(arn2)
	if _, got := signedBedrock(t, s, http.MethodGet, path2, "", "bedrock"); gjson.Get(got, "status").Str != "Submitted" {
		t.Errorf("a held job: %s", got)
	}
	if _, got := signedBedrock(t, s, http.MethodGet, "/model-invocation-jobs?nameContains=j-2&maxResults=10", "", "bedrock"); len(gjson.Get(got, "invocationJobSummaries").Array()) != 1 ||
		gjson.Get(got, "invocationJobSummaries.0.jobArn").Str != arn2 {
		t.Errorf("list by name: %s", got)
	}
	s.HoldBatches(false)
	if _, got := signedBedrock(t, s, http.MethodGet, path2, "", "bedrock"); gjson.Get(got, "status").Str != "PartiallyCompleted" {
		t.Errorf("the job: %s", got)
	}
	jobID := arn2[strings.LastIndexByte(arn2, '/')+1:]
	out, err := objects.Get("b", "p/out/"+jobID+"/in.jsonl.out")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 100 || gjson.Get(lines[0], "recordId").Str != "r99" || !strings.Contains(gjson.Get(lines[0], "modelOutput.content.0.text").Str, "say 99") {
		t.Fatalf("output: %d lines, first %s", len(lines), lines[0])
	}
	if l := lines[94]; gjson.Get(l, "recordId").Str != "r5" || gjson.Get(l, "error.errorCode").Int() != 400 || !strings.Contains(gjson.Get(l, "error.errorMessage").Str, "top_p") {
		t.Errorf("the refused record: %s", l)
	}
	if m, _ := objects.Get("b", "p/out/"+jobID+"/manifest.json.out"); gjson.GetBytes(m, "successRecordCount").Int() != 99 || gjson.GetBytes(m, "errorRecordCount").Int() != 1 {
		t.Errorf("manifest %s", m)
	}
	if status, got := signedBedrock(t, s, http.MethodPost, path2+"/stop", "", "bedrock"); status != 400 {
		t.Errorf("stopping an ended job: %d %s", status, got)
	}
}

// TestVertexBatch: a job reads its lines from the bucket once it runs,
// answers Gemini's and Claude's requests in reverse order with the
// refused ones' status, names its output directory, is listed by display
// name and cancelled with the half it finished.
func TestVertexBatch(t *testing.T) {
	objects := &memObjects{m: map[string][]byte{}}
	s := Start(t, Options{Objects: objects, Keys: map[string]string{"vertex_batch": "vk"}})
	auth := []string{"Authorization", "Bearer vk"}
	const parent = "/v1/projects/p/locations/us-central1/batchPredictionJobs"
	create := func(display, model, input string) string {
		t.Helper()
		res, got := Send(t, http.MethodPost, s.URL+parent, `{"displayName":"`+display+`","model":"`+model+`","inputConfig":{"instancesFormat":"jsonl","gcsSource":{"uris":["gs://b/`+input+`"]}},`+
			`"outputConfig":{"predictionsFormat":"jsonl","gcsDestination":{"outputUriPrefix":"gs://b/out"}}}`, auth...)
		if res.StatusCode != 200 || gjson.Get(got, "state").Str != "JOB_STATE_PENDING" {
			t.Fatalf("create: %d %s", res.StatusCode, got)
		}
		return gjson.Get(got, "name").Str
	}
	_ = objects.Put("b", "g.jsonl", []byte(`{"request":{"contents":[{"role":"user","parts":[{"text":"say 0"}]}],"labels":{"k":"0"}}}
{"request":{"contents":[{"role":"user","parts":[{"text":"say 1"}]}],"generationConfig":{"temperature":5}}}
`))
	_ = objects.Put("b", "c.jsonl", []byte(`{"custom_id":"a","request":{"anthropic_version":"vertex-2023-10-16","max_tokens":5,"messages":[{"role":"user","content":"say a"}]}}
{"custom_id":"b","request":{"anthropic_version":"vertex-2023-10-16","max_tokens":5,"messages":[{"role":"user","content":"say b"}]}}
{"custom_id":"c","request":{"anthropic_version":"vertex-2023-10-16","max_tokens":5,"messages":[{"role":"user","content":"say c"}],"top_p":2}}
`))
	g := create("g-job", "publishers/google/models/gemini-2.5-flash", "g.jsonl")
	res, got := Send(t, http.MethodGet, s.URL+"/v1/"+g, "", auth...)
	dir := gjson.Get(got, "outputInfo.gcsOutputDirectory").Str
	if res.StatusCode != 200 || gjson.Get(got, "state").Str != "JOB_STATE_SUCCEEDED" || !strings.HasPrefix(dir, "gs://b/out/prediction-model-") ||
		gjson.Get(got, "completionStats.successfulCount").Str != "1" || gjson.Get(got, "completionStats.failedCount").Str != "1" {
		t.Fatalf("the Gemini job: %d %s", res.StatusCode, got)
	}
	out, err := objects.Get("b", strings.TrimPrefix(dir, "gs://b/")+"/predictions.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || gjson.Get(lines[1], "request.labels.k").Str != "0" || gjson.Get(lines[1], "status").Str != "" || !gjson.Get(lines[1], "response.candidates").Exists() ||
		!strings.HasPrefix(gjson.Get(lines[0], "status").Str, "Bad Request: {") || gjson.Get(lines[0], "response").Exists() {
		t.Errorf("Gemini's predictions: %s", out)
	}

	s.HoldBatches(true)
	c := create("c-job", "publishers/anthropic/models/claude-haiku-4-5@20251001", "c.jsonl")
	if res, got := Send(t, http.MethodGet, s.URL+parent+`?filter=display_name%3D%22c-job%22`, "", auth...); res.StatusCode != 200 ||
		len(gjson.Get(got, "batchPredictionJobs").Array()) != 1 || gjson.Get(got, "batchPredictionJobs.0.name").Str != c {
		t.Errorf("list by display name: %d %s", res.StatusCode, got)
	}
	if res, got := Send(t, http.MethodPost, s.URL+"/v1/"+c+":cancel", "", auth...); res.StatusCode != 200 {
		t.Fatalf("cancel: %d %s", res.StatusCode, got)
	}
	_, got = Send(t, http.MethodGet, s.URL+"/v1/"+c, "", auth...)
	dir = gjson.Get(got, "outputInfo.gcsOutputDirectory").Str
	out, _ = objects.Get("b", strings.TrimPrefix(dir, "gs://b/")+"/predictions.jsonl")
	if gjson.Get(got, "state").Str != "JOB_STATE_CANCELLED" || strings.Count(string(out), "\n") != 1 || gjson.GetBytes(out, "custom_id").Str != "a" ||
		gjson.GetBytes(out, "response.type").Str != "message" {
		t.Errorf("the cancelled Claude job: %s; %s", got, out)
	}
	if res, _ := Send(t, http.MethodGet, s.URL+"/v1/"+c, ""); res.StatusCode != 401 {
		t.Errorf("no token: %d", res.StatusCode)
	}
}
