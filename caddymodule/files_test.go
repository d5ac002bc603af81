package caddymodule

import (
	"bytes"
	"context"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/internal/storagetest"
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
