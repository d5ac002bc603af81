package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers/providertest"
)

// cloudBatchCaddyfile is a gateway with Bedrock and Vertex AI providers
// whose batch lines go to batch inference and batch prediction (their
// buckets and Bedrock's control plane pointed at the fakes), and a Vertex
// AI provider with a bucket whose batch option keeps its lines live.
const cloudBatchCaddyfile = `{
	admin localhost:2999
	http_port 9080
	https_port 9443
	grace_period 1ns
	skip_install_trust
	log {
		output file {$MG_LOG_DIR}/caddy.log
		level INFO
	}
	modelgate {
		provider aws bedrock {
			base_url {$MG_FAKE}
			region us-east-1
			access_key_id {env.MG_CLOUD_KEY_ID}
			secret_access_key {env.MG_CLOUD_SECRET}
			batch_bucket s3://mg-bedrock-batches/modelgate
			batch_role arn:aws:iam::123456789012:role/bedrock-batch
			batch_control_url {$MG_FAKE}
			batch_storage_url {$MG_S3}/mg-bedrock-batches
		}
		provider vx vertex {
			base_url {$MG_FAKE}/v1
			project test-project
			location us-central1
			credentials_file {env.MG_VERTEX_CREDENTIALS}
			batch_bucket gs://mg-vertex-batches/modelgate
			batch_storage_url {$MG_GCS}
		}
		provider vx_live vertex {
			batch gateway
			base_url {$MG_FAKE}/v1
			project test-project
			location us-central1
			credentials_file {env.MG_VERTEX_CREDENTIALS}
			batch_bucket gs://mg-vertex-batches/live
			batch_storage_url {$MG_GCS}
		}
		key alice {env.MG_ALICE_KEY}
		batch {
			checkpoint_interval 200ms
			lease 3s
			poll_interval 100ms
		}
		storage file_system {$MG_STORAGE}
	}
}

http://localhost:9080 {
	modelgate_auth
	modelgate
}
`

const (
	cloudBedrockBucket = "mg-bedrock-batches"
	cloudVertexBucket  = "mg-vertex-batches"
	cloudBedrockClaude = "anthropic.claude-sonnet-4-5-20250929-v1:0"
)

// cloudBuckets are the two buckets the fake's jobs read and write:
// Bedrock's in gofakes3's S3, Vertex AI's in fake-gcs-server's Cloud
// Storage, the same the gateway uploads to and downloads from.
type cloudBuckets struct {
	s3  *s3mem.Backend
	gcs *fakestorage.Server
}

func (b cloudBuckets) Get(bucket, key string) ([]byte, error) {
	if bucket == cloudBedrockBucket {
		obj, err := b.s3.GetObject(bucket, key, nil)
		if err != nil {
			return nil, err
		}
		defer obj.Contents.Close()
		return io.ReadAll(obj.Contents)
	}
	obj, err := b.gcs.GetObject(bucket, key)
	if err != nil {
		return nil, err
	}
	return obj.Content, nil
}

func (b cloudBuckets) Put(bucket, key string, data []byte) error {
	if bucket == cloudBedrockBucket {
		_, err := b.s3.PutObject(bucket, key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil)
		return err
	}
	b.gcs.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: bucket, Name: key, ContentType: "application/jsonl"}, Content: data})
	return nil
}

// startCloudBatchGateway starts the buckets and the fake, and loads
// cloudBatchCaddyfile in front of them.
func startCloudBatchGateway(t *testing.T) (*providertest.Server, cloudBuckets) {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(cloudBedrockBucket); err != nil {
		t.Fatal(err)
	}
	s3 := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(s3.Close)
	gcs, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true})
	if err != nil {
		t.Fatal(err)
	}
	gcs.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: cloudVertexBucket})
	gcsSrv := httptest.NewServer(gcs.HTTPHandler())
	t.Cleanup(gcsSrv.Close)
	buckets := cloudBuckets{s3: backend, gcs: gcs}

	const keyID, secret = "AKIDCLOUDBATCH", "cloud-batch-secret"
	fake := providertest.Start(t, providertest.Options{Objects: buckets,
		Keys: map[string]string{"bedrock": keyID + ":" + secret, "bedrock_batch": keyID + ":" + secret}})
	saFile := filepath.Join(t.TempDir(), "vertex-sa.json")
	if err := os.WriteFile(saFile, fake.GoogleServiceAccount(""), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MG_FAKE", fake.URL)
	t.Setenv("MG_S3", s3.URL)
	t.Setenv("MG_GCS", gcsSrv.URL)
	t.Setenv("MG_CLOUD_KEY_ID", keyID)
	t.Setenv("MG_CLOUD_SECRET", secret)
	t.Setenv("MG_VERTEX_CREDENTIALS", saFile)
	t.Setenv("MG_LOG_DIR", t.TempDir())
	t.Setenv("MG_STORAGE", storageDir(t))
	t.Setenv("MG_ALICE_KEY", aliceKey)
	caddytest.NewTester(t).InitServer(cloudBatchCaddyfile, "caddyfile")
	return fake, buckets
}

// liveCalls counts the live chat requests the fake got for each line,
// by the user text that names it, in the OpenAI, Anthropic and Gemini
// shapes.
func liveCalls(fake *providertest.Server) map[string]int {
	n := map[string]int{}
	for _, r := range fake.Requests() {
		for _, p := range []string{`messages.#(role=="user").content`, `messages.0.content.0.text`, `contents.0.parts.0.text`} {
			if id, ok := strings.CutSuffix(gjson.GetBytes(r.Body, p).Str, " says hi"); ok {
				n[id]++
				break
			}
		}
	}
	return n
}

// TestIntegrationCloudNativeBatch runs one batch through the host whose
// lines go to a Bedrock provider (Claude, 100 lines: batch inference
// takes no fewer), a Vertex AI provider (Gemini) and a Vertex AI provider
// with batch gateway. The first two go to one model invocation job and
// one batch prediction job, their records uploaded to and their results
// read from the buckets through the providers' batch service upstreams
// (batch_control_url, batch_storage_url), signed with SigV4 for bedrock
// and s3 and with the service account's tokens; the third's run live,
// one request each. The batch completes with one output line per input
// line, custom_ids kept, chat.completions, and usage at the batch price
// for the native lines and the live price for the others.
func TestIntegrationCloudNativeBatch(t *testing.T) {
	fake, buckets := startCloudBatchGateway(t)
	c := sdk(aliceKey)
	var lines []string
	models := map[string]string{}
	add := func(prefix, model string, n int) {
		for i := range n {
			id := fmt.Sprintf("%s-%d", prefix, i)
			lines = append(lines, nativeLine(id, model))
			models[id] = model
		}
	}
	add("aws", "aws/"+cloudBedrockClaude, 100)
	add("vx", "vx/gemini-2.5-flash", 6)
	add("live", "vx_live/gemini-2.5-flash", 4)

	b := newBatch(t, c, uploadLines(t, c, lines).ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	b = waitBatch(t, c, b.ID, 60*time.Second, "completed", "failed")
	if b.Status != "completed" || b.RequestCounts.Total != 110 || b.RequestCounts.Completed != 110 || b.RequestCounts.Failed != 0 {
		t.Fatalf("batch: %s", b.RawJSON())
	}
	if n := fake.BedrockJobsCreated(); n != 1 {
		t.Errorf("%d Bedrock model invocation jobs, want 1", n)
	}
	if n := fake.VertexJobsCreated(); n != 1 {
		t.Errorf("%d Vertex AI batch prediction jobs, want 1", n)
	}
	// Only the batch gateway provider's lines came as live requests.
	for id, n := range liveCalls(fake) {
		if !strings.HasPrefix(id, "live-") || n != 1 {
			t.Errorf("line %s came to the fake as a live request %d times", id, n)
		}
	}
	if n := len(liveCalls(fake)); n != 4 {
		t.Errorf("%d lines came live, want the 4 of vx_live", n)
	}
	// The records went through the buckets the gateway was pointed at.
	objs, err := buckets.s3.ListBucket(cloudBedrockBucket, nil, gofakes3.ListBucketPage{})
	if err != nil || len(objs.Contents) == 0 {
		t.Errorf("nothing in the S3 bucket: %v", err)
	}
	if got, err := buckets.gcs.ListObjectsWithOptionsPaginated(cloudVertexBucket, fakestorage.ListOptions{Prefix: "modelgate/"}); err != nil || len(got.Objects) == 0 {
		t.Errorf("nothing in the Cloud Storage bucket under modelgate/: %v", err)
	}

	out := fileLines(t, c, b.OutputFileID)
	if len(out) != 110 || b.ErrorFileID != "" {
		t.Fatalf("%d output lines, error file %q", len(out), b.ErrorFileID)
	}
	prices := pricing.Default()
	want := map[string]pricing.Money{}
	for id, model := range models {
		l, ok := out[id]
		body := l.Get("response.body")
		if !ok || l.Get("response.status_code").Int() != 200 || body.Get("object").Str != "chat.completion" ||
			body.Get("choices.0.message.role").Str != "assistant" || !body.Get("usage.prompt_tokens").Exists() {
			t.Errorf("%s: %s", id, l.Raw)
			continue
		}
		provider, m, _ := strings.Cut(model, "/")
		typ := map[string]string{"aws": "bedrock", "vx": "vertex", "vx_live": "vertex"}[provider]
		u := pricing.Usage{PromptTokens: body.Get("usage.prompt_tokens").Int(), CompletionTokens: body.Get("usage.completion_tokens").Int()}
		cost, ok := prices.Cost(typ, m, u)
		if provider != "vx_live" {
			cost, ok = prices.BatchCost(typ, m, u)
			if live, _ := prices.Cost(typ, m, u); cost >= live {
				t.Errorf("%s: batch price %v is not below the live price %v", id, cost, live)
			}
		}
		if !ok {
			t.Fatalf("%s has no price", model)
		}
		want[provider+"/"+m] += cost
	}
	// GET /modelgate/usage: the native lines at the batch price.
	status, body, _ := admin(t, http.MethodGet, "/modelgate/usage?group_by=provider,model", "")
	if status != 200 {
		t.Fatalf("usage: %d %s", status, body)
	}
	got := map[string]pricing.Money{}
	requests := map[string]int64{}
	for _, row := range gjson.Get(body, "rows").Array() {
		cost, err := pricing.ParseMoney(row.Get("cost_usd").Str)
		if err != nil {
			t.Fatal(err)
		}
		k := row.Get("provider").Str + "/" + row.Get("model").Str
		got[k], requests[k] = cost, row.Get("requests").Int()
	}
	counts := map[string]int64{"aws": 100, "vx": 6, "vx_live": 4}
	for k, w := range want {
		provider, _, _ := strings.Cut(k, "/")
		if got[k] != w || requests[k] != counts[provider] {
			t.Errorf("usage of %s: %v in %d requests, want %v in %d", k, got[k], requests[k], w, counts[provider])
		}
	}
}
