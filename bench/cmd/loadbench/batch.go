//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"time"

	"github.com/tidwall/gjson"
)

// batchResult is what the batch client prints at the end.
type batchResult struct {
	Lines       int     `json:"lines"`
	Status      string  `json:"status"`
	Seconds     float64 `json:"seconds"` // from creation to completed
	Completed   int64   `json:"completed"`
	Failed      int64   `json:"failed"`
	OutputLines int     `json:"output_lines"` // result lines with status 200 and a distinct custom_id
	UploadS     float64 `json:"upload_s"`
}

// runBatch drives a batch through the gateway's Files and Batch APIs, as
// a client of the OpenAI SDK would: it uploads a -lines JSONL file of chat
// requests (generated as it is sent), creates a batch on it (printing
// "creating" just before), polls it to its end (printing "ended"), then
// downloads the output file and checks that every line has one 200
// result; it prints its batchResult as JSON.
func runBatch(args []string) error {
	fs := flag.NewFlagSet("batch", flag.ContinueOnError)
	base := fs.String("url", "", "the gateway's base URL")
	lines := fs.Int("lines", 50000, "requests in the batch")
	key := fs.String("key", gatewayKey, "the gateway key")
	timeout := fs.Duration("timeout", 10*time.Minute, "longest the batch may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	do := func(method, path, contentType string, body io.Reader) ([]byte, error) {
		req, err := http.NewRequest(method, *base+path, body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+*key)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer func() { _ = res.Body.Close() }()
		b, err := io.ReadAll(res.Body)
		if err == nil && res.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s %s: status %d: %.300s", method, path, res.StatusCode, b)
		}
		return b, err
	}

	// Upload, generated as it is sent.
	upStart := time.Now()
	pr, pw := io.Pipe()
	bw := bufio.NewWriterSize(pw, 64<<10)
	mw := multipart.NewWriter(bw)
	go func() {
		err := mw.WriteField("purpose", "batch")
		var fw io.Writer
		if err == nil {
			fw, err = mw.CreateFormFile("file", "loadbench.jsonl")
		}
		for i := 0; i < *lines && err == nil; i++ {
			_, err = fw.Write(append(batchLine(i), '\n'))
		}
		if err == nil {
			err = mw.Close()
		}
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	b, err := do(http.MethodPost, "/v1/files", mw.FormDataContentType(), pr)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	fileID := gjson.GetBytes(b, "id").Str
	res := batchResult{Lines: *lines, UploadS: time.Since(upStart).Seconds()}

	fmt.Println("creating")
	start := time.Now()
	b, err = do(http.MethodPost, "/v1/batches", "application/json",
		bytes.NewReader([]byte(`{"input_file_id":"`+fileID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`)))
	if err != nil {
		return fmt.Errorf("creating the batch: %w", err)
	}
	id := gjson.GetBytes(b, "id").Str
	deadline := start.Add(*timeout)
	for {
		b, err = do(http.MethodGet, "/v1/batches/"+id, "", nil)
		if err != nil {
			return err
		}
		res.Status = gjson.GetBytes(b, "status").Str
		if res.Status == "completed" || res.Status == "failed" || res.Status == "expired" || res.Status == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the batch did not end in %s: %s", *timeout, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	res.Seconds = time.Since(start).Seconds()
	fmt.Println("ended")
	res.Completed = gjson.GetBytes(b, "request_counts.completed").Int()
	res.Failed = gjson.GetBytes(b, "request_counts.failed").Int()

	if out := gjson.GetBytes(b, "output_file_id").Str; out != "" {
		req, _ := http.NewRequest(http.MethodGet, *base+"/v1/files/"+out+"/content", nil)
		req.Header.Set("Authorization", "Bearer "+*key)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		seen := make(map[string]bool, *lines)
		sc := bufio.NewScanner(r.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			v := gjson.GetManyBytes(sc.Bytes(), "custom_id", "response.status_code")
			if v[1].Int() == 200 && !seen[v[0].Str] {
				seen[v[0].Str] = true
				res.OutputLines++
			}
		}
		_ = r.Body.Close()
		if err := sc.Err(); err != nil {
			return err
		}
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
