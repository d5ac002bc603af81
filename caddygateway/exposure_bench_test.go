package caddygateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/certmagic"

	"github.com/modelgate/modelgate/keys"
)

// fakeKeysBody is a chat request whose prompt holds n distinct managed
// keys that are well formed (their checksums match) but exist nowhere:
// anyone can write such keys, as the checksum is public.
func fakeKeysBody(tb testing.TB, n int) []byte {
	tb.Helper()
	var sb strings.Builder
	for range n {
		k, err := keys.Generate()
		if err != nil {
			tb.Fatal(err)
		}
		sb.WriteString(k)
		sb.WriteByte(' ')
	}
	return benchChatBodyText("oa/gpt-4o-mini", sb.String())
}

// benchChatBodyText is a chat request with text as the user's message.
func benchChatBodyText(model, text string) []byte {
	return []byte(`{"model":"` + model + `","max_tokens":256,"messages":[{"role":"user","content":"` + text + `"}]}`)
}

// BenchmarkExposureFakeKeys is one chat request whose prompt holds 5,000
// distinct fake managed keys (well formed, in no store), through
// modelgate_auth and the modelgate handler to the in-memory provider, and
// the gateway's work looking those keys up in the background, against a
// store of 16 and of 1,000 managed keys on Caddy's default storage (the
// file system). cpu-ns/op is the CPU time the process used per request,
// the background work included. no_keys is the same request with words
// of the same length in place of the keys: the difference is what the keys
// cost.
func BenchmarkExposureFakeKeys(b *testing.B) {
	body := fakeKeysBody(b, 5000)
	words := benchChatBodyText("oa/gpt-4o-mini", strings.Repeat(strings.Repeat("x", keys.Length)+" ", 5000))
	for _, bc := range []struct {
		name   string
		stored int
		body   []byte
	}{
		{"stored=16", 16, body},
		{"stored=1000", 1000, body},
		{"no_keys", 16, words},
	} {
		stored, body := bc.stored, bc.body
		b.Run(bc.name, func(b *testing.B) {
			g := newBenchGateway(b)
			fs := &certmagic.FileStorage{Path: b.TempDir()}
			g.app.managed = keys.NewManager(fs, "modelgate")
			withAccounts(g.app, fs)
			g.rebuild(b)
			for i := range stored {
				if _, _, err := g.app.managed.Create(context.Background(), keys.NewKey{Name: fmt.Sprint("k", i)}); err != nil {
					b.Fatal(err)
				}
			}
			hdr := []string{"Authorization", "Bearer " + benchStaticKey}
			serve := func() {
				w := &sink{header: make(http.Header)}
				if err := g.serveModelgate(w, g.request(w, "/v1/chat/completions", body, hdr...)); err != nil || w.status != 200 {
					b.Fatalf("status %d, error %v", w.status, err)
				}
				g.app.gw.WaitExposures()
			}
			serve()
			b.ReportAllocs()
			cpuBefore, cpuOK := processCPU()
			for b.Loop() {
				serve()
			}
			if cpuAfter, ok := processCPU(); ok && cpuOK {
				b.ReportMetric(float64(cpuAfter-cpuBefore)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
