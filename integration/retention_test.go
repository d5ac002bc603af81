package integration

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/modelgate/modelgate/providers/providertest"
)

// smallKey is the key of retention.Caddyfile whose owner may keep 4 KiB.
const smallKey = "mg-test-small-quota-key-0001"

// startRetentionGateway runs retention.Caddyfile, with what is stored
// expiring after retention, against a fake provider; it returns the
// storage directory.
func startRetentionGateway(t *testing.T, retention string) string {
	t.Helper()
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey, AnthropicKey: anthropicKey})
	dir := storageDir(t)
	for k, v := range map[string]string{
		"MG_FAKE": fake.URL, "MG_STORAGE": dir, "MG_LOG_DIR": t.TempDir(), "MG_RETENTION": retention,
		"MG_OPENAI_KEY": openAIKey, "MG_ANTHROPIC_KEY": anthropicKey, "MG_ALICE_KEY": aliceKey, "MG_SMALL_KEY": smallKey,
	} {
		t.Setenv(k, v)
	}
	loadRetentionCaddyfile(t)
	return dir
}

func loadRetentionCaddyfile(t *testing.T) {
	t.Helper()
	cfg, err := os.ReadFile("../testdata/caddyfiles/retention.Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	caddytest.NewTester(t).InitServer(string(cfg), "caddyfile")
}

// stored lists the files and stored responses under the storage
// directory dir, as paths from it.
func stored(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(dir, "modelgate", "o"), func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.Contains(rel, "/files/") || strings.Contains(rel, "/responses/") {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitGone waits up to 15 s for cond, which says what is still there.
func waitGone(t *testing.T, what string, cond func() []string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := cond()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still there after 15s: %v", what, left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestIntegrationRetention: files, batch results and stored responses
// expire as the retention block says — the client's expires_after and
// output_expires_after capped by it, expires_at telling when — and are
// then gone for their owner (404) and deleted from the storage by the
// sweep, which a config reload in between does not stop.
func TestIntegrationRetention(t *testing.T) {
	dir := startRetentionGateway(t, "3s")
	c := sdk(aliceKey)
	ctx := context.Background()

	input, err := c.Files.New(ctx, openai.FileNewParams{Purpose: openai.FilePurposeBatch,
		File:         openai.File(strings.NewReader(chatLine("r-1", "claude/claude-sonnet-4-5")+"\n"), "input.jsonl", "application/jsonl"),
		ExpiresAfter: openai.FileNewParamsExpiresAfter{Seconds: 3600}})
	if err != nil {
		t.Fatal(err)
	}
	if input.ExpiresAt != input.CreatedAt+3 {
		t.Errorf("an upload asking for an hour under a retention of 3s expires at %d, created at %d", input.ExpiresAt, input.CreatedAt)
	}
	_, err = c.Files.New(ctx, openai.FileNewParams{Purpose: openai.FilePurposeBatch,
		File:         openai.File(strings.NewReader("{}\n"), "x.jsonl", "application/jsonl"),
		ExpiresAfter: openai.FileNewParamsExpiresAfter{Seconds: 60}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "expires_after.seconds" {
		t.Errorf("expires_after of a minute: %v", err)
	}

	b, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: input.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow:   openai.BatchNewParamsCompletionWindow24h,
		OutputExpiresAfter: openai.BatchNewParamsOutputExpiresAfter{Seconds: 3600}})
	if err != nil {
		t.Fatal(err)
	}
	b = waitBatch(t, c, b.ID, 10*time.Second, openai.BatchStatusCompleted)
	output, err := c.Files.Get(ctx, b.OutputFileID)
	if err != nil {
		t.Fatal(err)
	}
	if output.ExpiresAt != output.CreatedAt+3 || output.Purpose != "batch_output" {
		t.Errorf("the batch's output file: %s", output.RawJSON())
	}

	res, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "claude/claude-sonnet-4-5",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("keep me a while")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Responses.Get(ctx, res.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatalf("the stored response, at once: %v", err)
	}
	if left := stored(t, dir); len(left) == 0 {
		t.Fatal("nothing stored")
	}
	// A reload keeps the sweep going: the worker belongs to the storage.
	t.Setenv("MG_SWEEP", "300ms")
	loadRetentionCaddyfile(t)

	waitGone(t, "expired objects, for their owner", func() []string {
		var left []string
		for _, id := range []string{input.ID, output.ID} {
			if _, err := c.Files.Get(ctx, id); !isStatus(err, 404) {
				left = append(left, id)
			}
		}
		if _, err := c.Responses.Get(ctx, res.ID, responses.ResponseGetParams{}); !isStatus(err, 404) {
			left = append(left, res.ID)
		}
		return left
	})
	waitGone(t, "expired objects, in the storage", func() []string { return stored(t, dir) })
	if page, err := c.Files.List(ctx, openai.FileListParams{}); err != nil || len(page.Data) != 0 {
		t.Errorf("files listed after they expired: %v %v", page, err)
	}
}

// TestIntegrationStorageQuota: an owner's uploads count against its
// storage quota; one that does not fit is refused with 400
// storage_quota_exceeded in OpenAI's shape, which the SDK reports and does
// not retry, and nothing of it is kept; deleting a file makes room; other
// owners have their own.
func TestIntegrationStorageQuota(t *testing.T) {
	dir := startRetentionGateway(t, "1h")
	c := sdk(smallKey)
	ctx := context.Background()
	upload := func(c openai.Client, n int) (*openai.FileObject, error) {
		return c.Files.New(ctx, openai.FileNewParams{Purpose: openai.FilePurposeBatch,
			File: openai.File(bytes.NewReader(bytes.Repeat([]byte("x"), n)), "f.jsonl", "application/jsonl")})
	}
	first, err := upload(c, 3<<10)
	if err != nil {
		t.Fatal(err)
	}
	before := stored(t, dir)
	_, err = upload(c, 2<<10)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type != "invalid_request_error" ||
		apiErr.Code != "storage_quota_exceeded" || apiErr.Param != "file" || !strings.Contains(apiErr.Message, "4.0 KiB") {
		t.Fatalf("2 KiB more over a quota of 4 KiB holding 3 KiB: %v", err)
	}
	if after := stored(t, dir); len(after) != len(before) {
		t.Errorf("a refused upload left %v", after)
	}
	if _, err := upload(c, 1<<10); err != nil {
		t.Errorf("1 KiB more, which fits: %v", err)
	}
	if _, err := upload(c, 1); err == nil {
		t.Error("a byte more, at the quota, was accepted")
	}
	if _, err := c.Files.Delete(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := upload(c, 2<<10); err != nil {
		t.Errorf("2 KiB once 3 KiB were deleted: %v", err)
	}
	if _, err := upload(sdk(aliceKey), 8<<10); err != nil {
		t.Errorf("another owner, under its own quota: %v", err)
	}
}
