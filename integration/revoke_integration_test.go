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
