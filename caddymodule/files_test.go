package caddymodule

import (
	"bytes"
	"context"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/modelgate/modelgate/keys"
)

// withFiles gives g's app the Files and Batch APIs' store, in memory, and
// returns that memory.
func withFiles(g *benchGateway) *storagetest.Memory {
	mem := storagetest.NewMemory()
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
	mem := withFiles(g)
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
	if page, err := g.app.store.ListFiles(context.Background(), "bench", batch.ListOptions{Limit: 10}); err != nil || len(page.Data) != 1 {
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
			mem := withFiles(g)
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
			if page, err := g.app.store.ListFiles(context.Background(), "bench", batch.ListOptions{Limit: 10}); err != nil || len(page.Data) != 2 {
				t.Errorf("files after a refused upload: %d %v", len(page.Data), err)
			}
			if n := len(mem.Keys("modelgate/")); n != 4 { // two files: a part and meta.json each
				t.Errorf("storage holds %d keys after two uploads and a refused one", n)
			}
		})
	}
}
