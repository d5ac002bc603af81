package caddygateway

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/keys"
)

// withFiles gives g's app the Files and Batch APIs' store, in memory, and
// returns that memory; batch events go to an events app without
// subscribers.
func withFiles(tb testing.TB, g *benchGateway) *storagetest.Memory {
	tb.Helper()
	mem := storagetest.NewMemory()
	ctx, err := caddy.ProvisionContext(&caddy.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	ev, err := ctx.App("events")
	if err != nil {
		tb.Fatal(err)
	}
	g.app.ctx, g.app.events = ctx, ev.(*caddyevents.App)
	g.app.Batch = &BatchConfig{MaxFileSize: 1 << 20, CompletionWindow: caddy.Duration(defaultCompletionWindow)}
	g.app.store = batch.NewStore(mem, "modelgate")
	return mem
}

// multipartUpload is a POST /v1/files body: purpose, then the file.
func multipartUpload(t testing.TB, purpose string, content []byte) (body []byte, contentType string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if err := mw.WriteField("purpose", purpose); err != nil {
		t.Fatal(err)
	}
	fw, err := mw.CreateFormFile("file", "requests.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), mw.FormDataContentType()
}

// upload sends body to POST /v1/files with key.
func (g *benchGateway) upload(t testing.TB, key string, body []byte, contentType string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	r := g.request(rec, "/v1/files", body, "Content-Type", contentType, "Authorization", "Bearer "+key)
	if err := g.serveModelgate(rec, r); err != nil {
		t.Fatal(err)
	}
	return rec
}

// An upload cut short — the multipart body ends inside the file or before
// its closing boundary — is the client's failure: 400 in OpenAI's shape,
// nothing kept; not the 500 of a storage that failed.
func TestUploadCutShort(t *testing.T) {
	g := newBenchGateway(t)
	mem := withFiles(t, g)
	content := bytes.Repeat([]byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}`+"\n"), 100)
	body, ct := multipartUpload(t, "batch", content)
	closing := bytes.LastIndex(body, []byte("\r\n--"))
	for name, cut := range map[string][]byte{
		"inside the file":             body[:closing-len(content)/2],
		"before the closing boundary": body[:closing],
		"inside the closing boundary": body[:closing+4],
	} {
		t.Run(name, func(t *testing.T) {
			rec := g.upload(t, benchStaticKey, cut, ct)
			if rec.Code != http.StatusBadRequest || gjson.Get(rec.Body.String(), "error.type").Str != "invalid_request_error" ||
				gjson.Get(rec.Body.String(), "error.param").Str != "file" {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if keys := mem.Keys("modelgate/"); len(keys) != 0 {
				t.Errorf("a cut-short upload left %v", keys)
			}
		})
	}
	// The whole body still uploads.
	if rec := g.upload(t, benchStaticKey, body, ct); rec.Code != http.StatusOK || gjson.Get(rec.Body.String(), "bytes").Int() != int64(len(content)) {
		t.Fatalf("the whole upload: %d %s", rec.Code, rec.Body)
	}
	if page, err := g.app.store.ListFiles(context.Background(), gateway.StaticOwnerPrefix+"bench", batch.ListOptions{Limit: 10}); err != nil || len(page.Data) != 1 {
		t.Errorf("files after one whole upload: %+v %v", page.Data, err)
	}
}

// Requests that cost nothing — count_tokens, which the providers do not
// charge for, and file uploads, which no provider sees — count against
// the requests per minute of their key and of its owner, as every request
// does (429 in their API's shape once over), and against nothing else: a
// tokens-per-minute limit of 1 and a budget of a millionth of a dollar,
// which no request that costs anything fits, admit them.
func TestFreeRequestsCountAgainstRequestsPerMinute(t *testing.T) {
	countTokens := []byte(`{"model":"claude/claude-sonnet-4-5","messages":[{"role":"user","content":"how many tokens is this?"}]}`)
	upload, ct := multipartUpload(t, "batch", []byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}`+"\n"))
	spent := &keys.Budget{USD: "0.000001", Period: "total"}
	for _, tc := range []struct {
		name   string
		limits *LimitsConfig
	}{
		{"the key's", &LimitsConfig{Key: &keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 2, TokensPerMinute: 1}, Budget: spent}}},
		{"the owner's", &LimitsConfig{Owner: &keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 2, TokensPerMinute: 1}, Budget: spent}}},
	} {
		t.Run(tc.name+"/count_tokens", func(t *testing.T) {
			g := newBenchGateway(t)
			withLimits(t, g, tc.limits)
			for i := range 3 {
				rec := httptest.NewRecorder()
				r := g.request(rec, "/v1/messages/count_tokens", countTokens, "X-Api-Key", benchStaticKey, "Anthropic-Version", "2023-06-01")
				if err := g.serveModelgate(rec, r); err != nil {
					t.Fatal(err)
				}
				body := rec.Body.String()
				switch {
				case i < 2 && (rec.Code != http.StatusOK || gjson.Get(body, "input_tokens").Int() == 0):
					t.Fatalf("request %d: %d %s", i+1, rec.Code, body)
				case i < 2 && rec.Header().Get("Anthropic-Ratelimit-Requests-Remaining") != strconv.Itoa(1-i):
					t.Errorf("request %d: anthropic-ratelimit-requests-remaining %q", i+1, rec.Header().Get("Anthropic-Ratelimit-Requests-Remaining"))
				case i == 2 && (rec.Code != http.StatusTooManyRequests || gjson.Get(body, "type").Str != "error" ||
					gjson.Get(body, "error.type").Str != "rate_limit_error" || rec.Header().Get("Retry-After") == ""):
					t.Fatalf("the 3rd request of the minute: %d %s %v", rec.Code, body, rec.Header())
				}
			}
		})
		t.Run(tc.name+"/upload", func(t *testing.T) {
			g := newBenchGateway(t)
			mem := withFiles(t, g)
			withLimits(t, g, tc.limits)
			for i := range 3 {
				rec := g.upload(t, benchStaticKey, upload, ct)
				body := rec.Body.String()
				switch {
				case i < 2 && (rec.Code != http.StatusOK || rec.Header().Get("X-Ratelimit-Remaining-Requests") != strconv.Itoa(1-i)):
					t.Fatalf("upload %d: %d %s %v", i+1, rec.Code, body, rec.Header())
				case i == 2 && (rec.Code != http.StatusTooManyRequests || gjson.Get(body, "error.code").Str != "rate_limit_exceeded" ||
					rec.Header().Get("Retry-After") == ""):
					t.Fatalf("the 3rd upload of the minute: %d %s %v", rec.Code, body, rec.Header())
				}
			}
			if page, err := g.app.store.ListFiles(context.Background(), gateway.StaticOwnerPrefix+"bench", batch.ListOptions{Limit: 10}); err != nil || len(page.Data) != 2 {
				t.Errorf("files after a refused upload: %d %v", len(page.Data), err)
			}
			if n := len(mem.Keys("modelgate/")); n != 4 { // two files: a part and meta.json each
				t.Errorf("storage holds %d keys after two uploads and a refused one", n)
			}
		})
	}
}

// An upload may ask to expire sooner than the files retention, as
// OpenAI's Files API takes it (expires_after[anchor] and
// expires_after[seconds], before or after the file); not later, and not
// outside OpenAI's bounds or from another anchor.
func TestUploadExpiresAfter(t *testing.T) {
	g := newBenchGateway(t)
	withFiles(t, g)
	g.app.store = batch.NewStore(storagetest.NewMemory(), "modelgate", batch.WithRetention(batch.Retention{Files: 48 * time.Hour}))
	upload := func(fields [][2]string, fieldsFirst bool) *httptest.ResponseRecorder {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		write := func() {
			for _, f := range fields {
				if err := mw.WriteField(f[0], f[1]); err != nil {
					t.Fatal(err)
				}
			}
		}
		if fieldsFirst {
			write()
		}
		fw, _ := mw.CreateFormFile("file", "in.jsonl")
		_, _ = fw.Write([]byte("{}\n"))
		if !fieldsFirst {
			write()
		}
		_ = mw.Close()
		return g.upload(t, benchStaticKey, buf.Bytes(), mw.FormDataContentType())
	}
	purpose := [2]string{"purpose", "batch"}
	for _, tc := range []struct {
		name   string
		fields [][2]string
		want   int64  // seconds from created_at to expires_at
		param  string // refused with 400 naming this
	}{
		{"none: the retention", [][2]string{purpose}, 48 * 3600, ""},
		{"an hour", [][2]string{purpose, {"expires_after[anchor]", "created_at"}, {"expires_after[seconds]", "3600"}}, 3600, ""},
		{"without the anchor", [][2]string{purpose, {"expires_after[seconds]", "7200"}}, 7200, ""},
		{"longer than the retention", [][2]string{purpose, {"expires_after[anchor]", "created_at"}, {"expires_after[seconds]", "2592000"}}, 48 * 3600, ""},
		{"under an hour", [][2]string{purpose, {"expires_after[anchor]", "created_at"}, {"expires_after[seconds]", "3599"}}, 0, "expires_after.seconds"},
		{"over 30 days", [][2]string{purpose, {"expires_after[seconds]", "2592001"}}, 0, "expires_after.seconds"},
		{"not a number", [][2]string{purpose, {"expires_after[seconds]", "1h"}}, 0, "expires_after.seconds"},
		{"the anchor alone", [][2]string{purpose, {"expires_after[anchor]", "created_at"}}, 0, "expires_after.seconds"},
		{"another anchor", [][2]string{purpose, {"expires_after[anchor]", "last_active_at"}, {"expires_after[seconds]", "3600"}}, 0, "expires_after.anchor"},
	} {
		for _, first := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/fields first %v", tc.name, first), func(t *testing.T) {
				rec := upload(tc.fields, first)
				body := rec.Body.String()
				if tc.param != "" {
					if rec.Code != http.StatusBadRequest || gjson.Get(body, "error.param").Str != tc.param {
						t.Fatalf("%d %s, want 400 naming %s", rec.Code, body, tc.param)
					}
					return
				}
				if rec.Code != http.StatusOK || gjson.Get(body, "expires_at").Int()-gjson.Get(body, "created_at").Int() != tc.want {
					t.Fatalf("%d %s, want expires_at %d s after created_at", rec.Code, body, tc.want)
				}
			})
		}
	}
}

// A batch's output_expires_after is checked as an upload's expires_after
// is.
func TestBatchOutputExpiresAfter(t *testing.T) {
	g := newBenchGateway(t)
	withFiles(t, g)
	body, ct := multipartUpload(t, "batch", []byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"oa/gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}}`+"\n"))
	input := gjson.Get(g.upload(t, benchStaticKey, body, ct).Body.String(), "id").Str
	for policy, param := range map[string]string{
		`{"anchor":"created_at","seconds":60}`:     "output_expires_after.seconds",
		`{"anchor":"created_at","seconds":"3600"}`: "output_expires_after.seconds",
		`{"anchor":"completed_at","seconds":3600}`: "output_expires_after.anchor",
		`{"anchor":"created_at","seconds":3600}`:   "",
	} {
		rec := g.serve(t, http.MethodPost, "/v1/batches",
			[]byte(`{"input_file_id":"`+input+`","endpoint":"/v1/chat/completions","completion_window":"24h","output_expires_after":`+policy+`}`), benchStaticKey)
		switch {
		case param == "" && rec.Code != http.StatusOK:
			t.Errorf("%s: %d %s", policy, rec.Code, rec.Body)
		case param != "" && (rec.Code != http.StatusBadRequest || gjson.Get(rec.Body.String(), "error.param").Str != param):
			t.Errorf("%s: %d %s, want 400 naming %s", policy, rec.Code, rec.Body, param)
		}
	}
}
