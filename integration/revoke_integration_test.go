package integration

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/providertest"
)

const revokeCaddyfile = "../testdata/caddyfiles/revoke.Caddyfile"

// startRevokeGateway loads revoke.Caddyfile in front of a fake provider,
// with a fresh storage and a test reporter for leak alerts.
func startRevokeGateway(t *testing.T) *scanningGateway {
	t.Helper()
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey, AnthropicKey: anthropicKey})
	g := &scanningGateway{
		gateway: &gateway{fake: fake, logDir: t.TempDir()},
		github:  newReporterKey(t, "github-test-"+hex.EncodeToString(randomBytes(t, 8)), "MG_GITHUB_KEY_ID", "MG_GITHUB_KEY_FILE"),
	}
	t.Setenv("MG_FAKE", fake.URL)
	t.Setenv("MG_LOG_DIR", g.logDir)
	t.Setenv("MG_STORAGE", storageDir(t))
	t.Setenv("MG_OPENAI_KEY", openAIKey)
	t.Setenv("MG_ANTHROPIC_KEY", anthropicKey)
	t.Setenv("MG_ALICE_KEY", aliceKey)
	cfg, err := os.ReadFile(revokeCaddyfile)
	if err != nil {
		t.Fatal(err)
	}
	caddytest.NewTester(t).InitServer(string(cfg), "caddyfile")
	return g
}

// adminKey creates a managed key through the admin API and returns its
// secret and id.
func adminKey(t *testing.T, body string) (secret, id string) {
	t.Helper()
	status, got, _ := admin(t, http.MethodPost, "/modelgate/keys", body)
	if status != http.StatusCreated {
		t.Fatalf("creating a key %s: %d %s", body, status, got)
	}
	return gjson.Get(got, "key").Str, gjson.Get(got, "id").Str
}

// doomedBatch starts a batch of n slow lines with the key secret and waits
// until some of them are answered; the batch is read back with reader, a
// key of the same owner.
func doomedBatch(t *testing.T, secret, reader string, n int) *openai.Batch {
	t.Helper()
	c := sdk(secret)
	var lines []string
	for i := range n {
		lines = append(lines, chatLine(fmt.Sprintf("d%d", i), "oa/slow-100ms"))
	}
	b := newBatch(t, c, uploadLines(t, c, lines).ID, openai.BatchNewParamsEndpointV1ChatCompletions)
	deadline := time.Now().Add(20 * time.Second)
	for b.RequestCounts.Completed < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("no progress: %s", b.RawJSON())
		}
		time.Sleep(50 * time.Millisecond)
		b = waitBatch(t, sdk(reader), b.ID, time.Second, "in_progress")
	}
	return b
}

// checkRevokedBatch waits until the batch of the revoked key keyID (name
// keyName), read with reader, is cancelled for it, and checks what its
// owner finds: the lines answered before in the output file, every other
// line in the error file as key_revoked naming the key, with its
// custom_id, and no request upstream once the cancel settled.
func checkRevokedBatch(t *testing.T, fake *providertest.Server, reader, id string, n int, keyID, keyName string) {
	t.Helper()
	c := sdk(reader)
	b := waitBatch(t, c, id, 5*time.Second, "cancelled")
	settled := len(fake.Requests())
	// Ten polls of the runner: a line still running anywhere would reach
	// the fake by then.
	time.Sleep(time.Second)
	if after := len(fake.Requests()) - settled; after != 0 {
		t.Errorf("%d requests reached the provider after the batch of the revoked key was cancelled", after)
	}
	if b.RequestCounts.Total != int64(n) || b.RequestCounts.Completed < 8 || b.RequestCounts.Completed == int64(n) ||
		b.RequestCounts.Completed+b.RequestCounts.Failed != int64(n) {
		t.Errorf("counts %+v", b.RequestCounts)
	}
	if len(b.Errors.Data) != 1 || b.Errors.Data[0].Code != "key_revoked" || !strings.Contains(b.Errors.Data[0].Message, keyID) ||
		!strings.Contains(b.Errors.Data[0].Message, keyName) {
		t.Errorf("the batch's errors do not say its key %s (%s) was revoked: %s", keyName, keyID, b.RawJSON())
	}
	checkOnce(t, c, b, n)
	out, errs := fileLines(t, c, b.OutputFileID), fileLines(t, c, b.ErrorFileID)
	for cid, l := range out {
		if l.Get("response.status_code").Int() != 200 {
			t.Errorf("output line %s: %s", cid, l.Raw)
		}
	}
	for cid, l := range errs {
		msg := l.Get("error.message").Str
		if !strings.HasPrefix(cid, "d") || l.Get("error.code").Str != "key_revoked" || l.Get("response").Type != gjson.Null ||
			!strings.Contains(msg, keyID) || !strings.Contains(msg, keyName) {
			t.Errorf("error line %s: %s", cid, l.Raw)
		}
	}
	// Of the error file's lines, only those in flight when the key was
	// revoked went upstream (and were stopped): at most one per worker.
	stopped := 0
	for line, times := range sentTimes(fake) {
		if _, ok := errs[line]; ok {
			stopped++
			if times != 1 {
				t.Errorf("%s went upstream %d times", line, times)
			}
		}
	}
	if stopped > revokeWorkers {
		t.Errorf("%d lines that end as key_revoked went upstream; at most the %d in flight when the key was revoked may have", stopped, revokeWorkers)
	}
}

// revokeWorkers is revoke.Caddyfile's batch workers.
const revokeWorkers = 4

// TestIntegrationRevokedKeyBatches: deleting a managed key through the
// admin API (what `caddy modelgate key delete` and the key settings page
// call) cancels its running batch at once: no line goes upstream after,
// the owner's other key reads a cancelled batch whose unfinished lines
// are key_revoked errors naming the key, and the answered ones are kept.
func TestIntegrationRevokedKeyBatches(t *testing.T) {
	g := startRevokeGateway(t)
	secret, id := adminKey(t, `{"name":"doomed","owner":"team-r"}`)
	reader, _ := adminKey(t, `{"name":"reader","owner":"team-r"}`)
	const n = 300
	b := doomedBatch(t, secret, reader, n)

	if status, body, _ := admin(t, http.MethodDelete, "/modelgate/keys/"+id, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	checkRevokedBatch(t, g.fake, reader, b.ID, n, id, "doomed")
}

// TestIntegrationAutoRevokedKeyBatches: auto_revoke deletes a leaked key
// through the same mechanism, so its batch is cancelled as a deleted
// key's: after a signed leak alert, and after the key was found in a
// request another key sent.
func TestIntegrationAutoRevokedKeyBatches(t *testing.T) {
	for _, how := range []string{"alert", "request"} {
		t.Run(how, func(t *testing.T) {
			g := startRevokeGateway(t)
			secret, id := adminKey(t, `{"name":"leaky","owner":"team-r"}`)
			reader, _ := adminKey(t, `{"name":"reader","owner":"team-r"}`)
			const n = 300
			b := doomedBatch(t, secret, reader, n)

			switch how {
			case "alert":
				body := alertBody(t, secret)
				status, labels := g.alert(t, "/hooks/secret-scanning", g.github.sign(t, "Github", body), body)
				if status != 200 || labels.Get("0.label").Str != "true_positive" {
					t.Fatalf("alert: %d %s", status, labels.Raw)
				}
			case "request":
				// Pasted into a prompt by the owner's other key.
				rc := sdk(reader)
				_, err := rc.Chat.Completions.New(context.Background(), userChat("oa/gpt-4o-mini", "why does this fail? KEY="+secret))
				if err != nil {
					t.Fatal(err)
				}
			}
			waitStatus(t, secret, http.StatusUnauthorized, "the leaked key to be revoked")
			checkRevokedBatch(t, g.fake, reader, b.ID, n, id, "leaky")
		})
	}
}

// TestIntegrationOwnersApart: a managed key named as a static key (so its
// owner is that name), and one given that name as its owner, cannot reach
// the static key's files, batches or stored responses: 404, and their
// lists do not show them; nor can the static key reach theirs. Managed
// keys of one owner still share.
func TestIntegrationOwnersApart(t *testing.T) {
	startRevokeGateway(t)
	ctx := context.Background()
	alice := sdk(aliceKey)
	named, _ := adminKey(t, `{"name":"alice"}`)
	owned, _ := adminKey(t, `{"name":"ci","owner":"alice"}`)

	// The static key's file, batch and stored response.
	in := uploadLines(t, alice, []string{chatLine("a", "oa/gpt-4o-mini")})
	b := waitBatch(t, alice, newBatch(t, alice, in.ID, openai.BatchNewParamsEndpointV1ChatCompletions).ID, 10*time.Second, "completed")
	status, body, _ := request(t, http.MethodPost, gatewayBase+"/v1/responses", `{"model":"claude/claude-sonnet-4-5","input":"hello there"}`,
		"Authorization", "Bearer "+aliceKey)
	resp := gjson.Get(body, "id").Str
	if status != 200 || resp == "" {
		t.Fatalf("POST /v1/responses: %d %s", status, body)
	}
	if status := getWith(t, "/v1/responses/"+resp, aliceKey); status != 200 {
		t.Fatalf("the static key's own response: %d", status)
	}

	for name, secret := range map[string]string{"named alice": named, "owned by alice": owned} {
		t.Run(name, func(t *testing.T) {
			for _, path := range []string{"/v1/files/" + in.ID, "/v1/files/" + in.ID + "/content", "/v1/files/" + b.OutputFileID,
				"/v1/batches/" + b.ID, "/v1/responses/" + resp, "/v1/responses/" + resp + "/input_items"} {
				if status := getWith(t, path, secret); status != http.StatusNotFound {
					t.Errorf("GET %s: %d, want 404", path, status)
				}
			}
			for _, tc := range []struct{ method, path string }{
				{http.MethodPost, "/v1/batches/" + b.ID + "/cancel"},
				{http.MethodDelete, "/v1/files/" + in.ID},
				{http.MethodDelete, "/v1/responses/" + resp},
			} {
				if status, got, _ := request(t, tc.method, gatewayBase+tc.path, "", "Authorization", "Bearer "+secret); status != http.StatusNotFound {
					t.Errorf("%s %s: %d %s, want 404", tc.method, tc.path, status, got)
				}
			}
			c := sdk(secret)
			if _, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: in.ID, Endpoint: "/v1/chat/completions", CompletionWindow: "24h"}); !isStatus(err, 400) {
				t.Errorf("a batch on the static key's file: %v, want 400", err)
			}
			if files, err := c.Files.List(ctx, openai.FileListParams{}); err != nil || len(files.Data) != 0 {
				t.Errorf("files: %v %+v", err, files)
			}
			if batches, err := c.Batches.List(ctx, openai.BatchListParams{}); err != nil || len(batches.Data) != 0 {
				t.Errorf("batches: %v %+v", err, batches)
			}
		})
	}

	// The managed keys' owner shares among its keys, and the static key
	// does not reach it.
	theirs := uploadLines(t, sdk(named), []string{chatLine("m", "oa/gpt-4o-mini")})
	if status := getWith(t, "/v1/files/"+theirs.ID, owned); status != 200 {
		t.Errorf("a managed key of the same owner: %d, want 200", status)
	}
	if status := getWith(t, "/v1/files/"+theirs.ID, aliceKey); status != http.StatusNotFound {
		t.Errorf("the static key on the managed keys' file: %d, want 404", status)
	}
	// The static key still has its own.
	if files, err := alice.Files.List(ctx, openai.FileListParams{}); err != nil || len(files.Data) != 2 {
		t.Errorf("the static key's files: %v %+v", err, files)
	}
	if status := getWith(t, "/v1/responses/"+resp, aliceKey); status != 200 {
		t.Errorf("the static key's response after: %d", status)
	}
}
