package batch_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/bedrock"
	"github.com/modelgate/modelgate/providers/gemini"
	"github.com/modelgate/modelgate/providers/providertest"
	"github.com/modelgate/modelgate/providers/vertex"
)

// sendWith is a transport over plain HTTP to base, each request made
// ready (signed) by prepare with the body it carries, nil when streamed.
func sendWith(base string, prepare func(hr *http.Request, body []byte) error) providers.Send {
	return func(ctx context.Context, req providers.Request) (providers.Answer, error) {
		u := base + req.Path
		if req.Query != "" {
			u += "?" + req.Query
		}
		var body io.Reader = bytes.NewReader(req.Body)
		length := int64(len(req.Body))
		signed := append([]byte{}, req.Body...)
		if req.Upload != nil {
			body, length, signed = req.Upload, req.Length, nil
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
		if err := prepare(hr, signed); err != nil {
			return providers.Answer{}, err
		}
		res, err := http.DefaultClient.Do(hr) //nolint:bodyclose // the Answer's Body, which its reader closes
		if err != nil {
			return providers.Answer{}, err
		}
		return providers.Answer{Status: res.StatusCode, Header: res.Header, Body: res.Body}, nil
	}
}

// sigV4 signs a request for service as the host's AWS signer does: the
// body's hash when it is held, UNSIGNED-PAYLOAD when it is streamed.
func sigV4(creds aws.Credentials, service string) func(*http.Request, []byte) error {
	return func(hr *http.Request, body []byte) error {
		hash := "UNSIGNED-PAYLOAD"
		if body != nil {
			sum := sha256.Sum256(body)
			hash = hex.EncodeToString(sum[:])
		}
		hr.Header.Set("X-Amz-Content-Sha256", hash)
		return v4.NewSigner().SignHTTP(hr.Context(), creds, hr, hash, service, "us-east-1", time.Now())
	}
}

// s3Objects is the bucket store of the S3 fake, as the provider fake
// reads and writes it.
type s3Objects struct{ b *s3mem.Backend }

func (o s3Objects) Get(bucket, key string) ([]byte, error) {
	obj, err := o.b.GetObject(bucket, key, nil)
	if err != nil {
		return nil, err
	}
	defer obj.Contents.Close()
	return io.ReadAll(obj.Contents)
}

func (o s3Objects) Put(bucket, key string, data []byte) error {
	_, err := o.b.PutObject(bucket, key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil)
	return err
}

// bedrockCloud is Bedrock's control plane (the provider fake, checking
// signatures) and an S3 bucket (gofakes3) it reads and writes.
type bedrockCloud struct {
	fake             *providertest.Server
	control, storage providers.Send
	objects          s3Objects
}

const (
	bedrockBucket = "mg-batches"
	bedrockRole   = "arn:aws:iam::123456789012:role/bedrock-batch"
	bedrockClaude = "anthropic.claude-sonnet-4-5-20250929-v1:0"
)

// deniedObjects is a bucket the job's role may not read.
type deniedObjects struct{ s3Objects }

func (deniedObjects) Get(string, string) ([]byte, error) { return nil, errors.New("Access Denied") }

func startBedrockCloud(t *testing.T, roleDenied bool) *bedrockCloud {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bedrockBucket); err != nil {
		t.Fatal(err)
	}
	s3 := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(s3.Close)
	objects := s3Objects{backend}
	var jobs providertest.Objects = objects
	if roleDenied {
		jobs = deniedObjects{objects}
	}
	creds := aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret"}
	fake := providertest.Start(t, providertest.Options{Objects: jobs, Keys: map[string]string{"bedrock_batch": "AKIDTEST:secret"}})
	return &bedrockCloud{fake: fake, objects: objects,
		control: sendWith(fake.URL, sigV4(creds, "bedrock")),
		storage: sendWith(s3.URL+"/"+bedrockBucket, sigV4(creds, "s3"))}
}

func (c *bedrockCloud) api(control, storage providers.Send) bedrock.Batches {
	return bedrock.Batches{Control: control, Storage: storage, Bucket: bedrockBucket, Prefix: "modelgate/batches", RoleARN: bedrockRole}
}

// TestNativeBedrockBatches runs chat lines through Bedrock batch
// inference (the control plane fake, records and output in gofakes3's
// S3): translated into InvokeModel bodies as live requests are, answered
// out of order as chat.completions, a record Claude refuses in the error
// file with its custom_id, a crash right after the upload and right
// after the create call (one job either way), a cancel and an expiry that
// keep the half the job finished, and a job Bedrock fails (its role cannot
// read the bucket) and a part under Bedrock's 100 records run in the
// gateway.
func TestNativeBedrockBatches(t *testing.T) {
	for _, tc := range []string{"run", "crash after upload", "crash after create", "cancel", "provider expiry", "job fails", "too few"} {
		t.Run(tc, func(t *testing.T) {
			cloud := startBedrockCloud(t, tc == "job fails")
			n := 120
			if tc == "too few" {
				n = 10
			}
			var cs *crashSend
			api := cloud.api(cloud.control, cloud.storage)
			switch tc {
			case "crash after upload":
				cs = &crashSend{next: cloud.storage, method: http.MethodPut, path: "/records.jsonl", at: make(chan struct{})}
				api.Storage = cs.send
			case "crash after create":
				cs = &crashSend{next: cloud.control, method: http.MethodPost, path: "/model-invocation-job", at: make(chan struct{})}
				api.Control = cs.send
			case "cancel", "provider expiry":
				cloud.fake.HoldBatches(true)
			}
			ex := &routeExecutor{}
			st := batch.NewStore(storagetest.NewMemory(), "mg")
			r := batch.NewRunner(st, "inst", 10*time.Millisecond, live(ex, map[string]batch.NativeAPI{"bedrock": api}))
			var lines []string
			for i := range n {
				extra := ""
				if i == 7 || i == 70 {
					extra = `,"top_p":1.5` // Claude refuses more than 1
				}
				lines = append(lines, chatLine(fmt.Sprintf("b-%d", i), "bedrock/"+bedrockClaude, extra))
			}
			ctx := context.Background()
			f, _ := st.PutFile(ctx, "o", "in.jsonl", batch.PurposeBatch, strings.NewReader(strings.Join(lines, "\n")+"\n"), 1<<30)
			b, err := st.CreateBatch(ctx, "o", batch.CreateParams{InputFileID: f.ID, Endpoint: batch.EndpointChat, CompletionWindow: "24h", Window: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			status := batch.StatusCompleted
			switch tc {
			case "crash after upload", "crash after create":
				select {
				case <-cs.at:
				case <-time.After(20 * time.Second):
					t.Fatal("the runner never got there")
				}
				_ = r.Destruct()
				r = batch.NewRunner(st, "inst", 10*time.Millisecond, live(ex, map[string]batch.NativeAPI{"bedrock": cloud.api(cloud.control, cloud.storage)}))
			case "cancel", "provider expiry":
				for deadline := time.Now().Add(10 * time.Second); cloud.fake.BedrockJobsCreated() == 0; time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("no job")
					}
				}
				if tc == "cancel" {
					status = batch.StatusCancelled
					if _, err := st.CancelBatch(ctx, "o", b.ID); err != nil {
						t.Fatal(err)
					}
				} else {
					cloud.fake.ExpireBatches()
				}
			}
			t.Cleanup(func() { _ = r.Destruct() })
			done := waitStatus(t, st, b.ID, status)
			got, counts := results(t, st, done)
			if len(counts) != n {
				t.Fatalf("%d custom_ids have results, want %d", len(counts), n)
			}
			for id, k := range counts {
				if k != 1 {
					t.Errorf("%s has %d result lines", id, k)
				}
			}
			if tc == "too few" || tc == "job fails" {
				jobs := map[string]int{"too few": 0, "job fails": 1}[tc]
				if cloud.fake.BedrockJobsCreated() != jobs || ex.ran.Load() < int64(n) {
					t.Errorf("%d jobs, %d gateway runs; want %d and every line", cloud.fake.BedrockJobsCreated(), ex.ran.Load(), jobs)
				}
				for id, l := range got {
					if l.Get("response.body.error.message").Str != "no gateway here" {
						t.Errorf("%s did not run in the gateway: %s", id, l.Raw)
					}
				}
				return
			}
			for i := range n {
				l := got[fmt.Sprintf("b-%d", i)]
				switch {
				case (tc == "cancel" || tc == "provider expiry") && i >= n/2:
					if want := map[string]string{"cancel": "batch_cancelled", "provider expiry": "batch_expired"}[tc]; l.Get("error.code").Str != want {
						t.Errorf("b-%d: %s, want %s", i, l.Raw, want)
					}
				case i == 7 || i == 70:
					if l.Get("response.status_code").Int() != 400 || !strings.Contains(l.Get("response.body.error.message").Str, "top_p") {
						t.Errorf("b-%d: %s, want Claude's 400", i, l.Raw)
					}
				case l.Get("response.status_code").Int() != 200 || l.Get("response.body.object").Str != "chat.completion" ||
					l.Get("response.body.choices.0.message.content").Str != fmt.Sprintf("echo: say b-%d", i) || l.Get("response.body.usage.total_tokens").Int() == 0:
					t.Errorf("b-%d: %s", i, l.Raw)
				}
			}
			if j := cloud.fake.BedrockJobsCreated(); j != 1 || ex.ran.Load() != 0 {
				t.Errorf("%d jobs, %d gateway lines; want 1 and 0", j, ex.ran.Load())
			}
			// One create call even after a crash: the restarted runner
			// found the job by its name rather than relying on the
			// request token.
			creates := 0
			for _, rq := range cloud.fake.Requests() {
				if rq.Method == http.MethodPost && rq.Path == "/model-invocation-job" {
					creates++
				}
			}
			if creates != 1 {
				t.Errorf("%d create calls, want 1", creates)
			}
			// The job read the records the part uploaded: InvokeModel
			// bodies keyed by the line's place.
			in, err := cloud.objects.Get(bedrockBucket, "modelgate/batches/"+markerOf(t, cloud.fake)+"/records.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := bytes.Cut(in, []byte("\n"))
			if !strings.HasPrefix(string(first), `{"recordId":"0","modelInput":{`) || !strings.Contains(string(first), `"anthropic_version":"bedrock-2023-05-31"`) ||
				strings.Contains(string(first), `"model"`) {
				t.Errorf("first record %s", first)
			}
		})
	}
}

// markerOf is the job name of the fake's one job, read from its create
// call: the part's marker.
func markerOf(t *testing.T, fake *providertest.Server) string {
	t.Helper()
	for _, rq := range fake.Requests() {
		if rq.Method == http.MethodPost && rq.Path == "/model-invocation-job" {
			if name := gjson.GetBytes(rq.Body, "jobName").Str; strings.HasPrefix(name, "mg-") {
				return name
			}
		}
	}
	t.Fatal("no create call with a marker")
	return ""
}

// gcsObjects is the bucket store of the Cloud Storage fake, as the
// provider fake reads and writes it.
type gcsObjects struct{ s *fakestorage.Server }

func (o gcsObjects) Get(bucket, key string) ([]byte, error) {
	obj, err := o.s.GetObject(bucket, key)
	if err != nil {
		return nil, err
	}
	return obj.Content, nil
}

func (o gcsObjects) Put(bucket, key string, data []byte) error {
	o.s.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: bucket, Name: key, ContentType: "application/jsonl"}, Content: data})
	return nil
}

// vertexCloud is Vertex AI (the provider fake) and a Cloud Storage bucket
// (fake-gcs-server) its jobs read and write.
type vertexCloud struct {
	fake             *providertest.Server
	control, storage providers.Send
	objects          gcsObjects
}

const vertexBucket = "mg-vertex-batches"

func startVertexCloud(t *testing.T) *vertexCloud {
	t.Helper()
	gcs, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true})
	if err != nil {
		t.Fatal(err)
	}
	gcs.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: vertexBucket})
	srv := httptest.NewServer(gcs.HTTPHandler())
	t.Cleanup(srv.Close)
	objects := gcsObjects{gcs}
	fake := providertest.Start(t, providertest.Options{Objects: objects, Keys: map[string]string{"vertex_batch": "g-token"}})
	bearer := func(hr *http.Request, _ []byte) error { hr.Header.Set("Authorization", "Bearer g-token"); return nil }
	return &vertexCloud{fake: fake, objects: objects, control: sendWith(fake.URL+"/v1", bearer), storage: sendWith(srv.URL, bearer)}
}

func (c *vertexCloud) api(control, storage providers.Send) vertex.Batches {
	return vertex.Batches{Control: control, Storage: storage, Bucket: vertexBucket, Prefix: "modelgate",
		Chat: vertex.Chat{Google: gemini.Chat{Vertex: true, Project: "proj-1", Location: "us-central1"},
			Claude: anthropic.Vertex{Project: "proj-1", Location: "us-central1"}}}
}

// TestNativeVertexBatches runs chat lines to Gemini and to Claude through
// Vertex AI batch prediction (the provider fake, lines and predictions in
// fake-gcs-server), one job per model: translated as live requests are
// (GenerateContentRequests with the key in a label, rawPredict bodies
// with a custom_id), answered out of order as chat.completions, requests
// each model refuses in the error file with their custom_id, a crash
// right after the upload and right after the create call (one job per
// model either way), a cancel and an expiry that keep the half each job
// finished.
func TestNativeVertexBatches(t *testing.T) {
	for _, tc := range []string{"run", "crash after upload", "crash after create", "cancel", "provider expiry"} {
		t.Run(tc, func(t *testing.T) {
			cloud := startVertexCloud(t)
			const n = 30
			var cs *crashSend
			api := cloud.api(cloud.control, cloud.storage)
			switch tc {
			case "crash after upload":
				cs = &crashSend{next: cloud.storage, method: http.MethodPost, path: "/o", at: make(chan struct{})}
				api.Storage = cs.send
			case "crash after create":
				cs = &crashSend{next: cloud.control, method: http.MethodPost, path: "/batchPredictionJobs", at: make(chan struct{})}
				api.Control = cs.send
			case "cancel", "provider expiry":
				cloud.fake.HoldBatches(true)
			}
			ex := &routeExecutor{}
			st := batch.NewStore(storagetest.NewMemory(), "mg")
			r := batch.NewRunner(st, "inst", 10*time.Millisecond, live(ex, map[string]batch.NativeAPI{"vertex": api}))
			var lines []string
			for i := range n {
				extra, claude := "", ""
				if i == 3 || i == 20 {
					extra = `,"temperature":5` // Gemini refuses this one
					claude = `,"top_p":1.5`    // and Claude this one
				}
				lines = append(lines, chatLine(fmt.Sprintf("v-%d", i), "vertex/gemini-2.5-flash", extra),
					chatLine(fmt.Sprintf("c-%d", i), "vertex/claude-sonnet-4-5@20250929", claude))
			}
			ctx := context.Background()
			f, _ := st.PutFile(ctx, "o", "in.jsonl", batch.PurposeBatch, strings.NewReader(strings.Join(lines, "\n")+"\n"), 1<<30)
			b, err := st.CreateBatch(ctx, "o", batch.CreateParams{InputFileID: f.ID, Endpoint: batch.EndpointChat, CompletionWindow: "24h", Window: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			status := batch.StatusCompleted
			switch tc {
			case "crash after upload", "crash after create":
				select {
				case <-cs.at:
				case <-time.After(20 * time.Second):
					t.Fatal("the runner never got there")
				}
				_ = r.Destruct()
				r = batch.NewRunner(st, "inst", 10*time.Millisecond, live(ex, map[string]batch.NativeAPI{"vertex": cloud.api(cloud.control, cloud.storage)}))
			case "cancel", "provider expiry":
				for deadline := time.Now().Add(10 * time.Second); cloud.fake.VertexJobsCreated() < 2; time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("no job")
					}
				}
				if tc == "cancel" {
					status = batch.StatusCancelled
					if _, err := st.CancelBatch(ctx, "o", b.ID); err != nil {
						t.Fatal(err)
					}
				} else {
					cloud.fake.ExpireBatches()
				}
			}
			t.Cleanup(func() { _ = r.Destruct() })
			done := waitStatus(t, st, b.ID, status)
			got, counts := results(t, st, done)
			if len(counts) != 2*n {
				t.Fatalf("%d custom_ids have results, want %d", len(counts), 2*n)
			}
			for id, k := range counts {
				if k != 1 {
					t.Errorf("%s has %d result lines", id, k)
				}
			}
			for _, p := range []string{"v", "c"} {
				for i := range n {
					l := got[fmt.Sprintf("%s-%d", p, i)]
					switch {
					case (tc == "cancel" || tc == "provider expiry") && i >= n/2:
						if want := map[string]string{"cancel": "batch_cancelled", "provider expiry": "batch_expired"}[tc]; l.Get("error.code").Str != want {
							t.Errorf("%s-%d: %s, want %s", p, i, l.Raw, want)
						}
					case i == 3 || i == 20:
						if l.Get("response.status_code").Int() != 400 || l.Get("response.body.error.message").Str == "" {
							t.Errorf("%s-%d: %s, want the model's 400", p, i, l.Raw)
						}
					case l.Get("response.status_code").Int() != 200 || l.Get("response.body.object").Str != "chat.completion" ||
						!strings.Contains(l.Get("response.body.choices.0.message.content").Str, fmt.Sprintf("say %s-%d", p, i)) || l.Get("response.body.usage.total_tokens").Int() == 0:
						t.Errorf("%s-%d: %s", p, i, l.Raw)
					}
				}
			}
			if j := cloud.fake.VertexJobsCreated(); j != 2 || ex.ran.Load() != 0 {
				t.Errorf("%d jobs, %d gateway lines; want 2 (one per model) and 0", j, ex.ran.Load())
			}
		})
	}
}
