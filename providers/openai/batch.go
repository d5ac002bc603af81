package openai

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Batches is OpenAI's Batch API, with the Files API its input and
// results go through, as the batch engine's NativeAPI: OpenAI itself,
// and Azure OpenAI's global batch (the same API under /openai, see
// AzureBatches). Lines are translated as live requests are (the model
// replaced); their answers are OpenAI's already.
type Batches struct {
	// Send carries the requests to the provider.
	Send providers.Send

	// Prefix is put before every path: "" when the base URL ends in
	// /v1 (OpenAI); "/openai" for Azure's classic API, "/openai/v1" for
	// its v1 API at the resource's endpoint.
	Prefix string

	// Query is added to every request: Azure's classic API wants
	// "api-version=…".
	Query string

	// Endpoint maps a batch endpoint to what the records and the batch
	// name (OpenAI: the endpoint itself; Azure: without /v1). Nil: the
	// endpoint itself.
	Endpoint func(endpoint string) string

	// Model maps the provider's model name to what the records name
	// (Azure: the deployment). Nil: the name itself.
	Model func(model string) string
}

// Limits per provider batch (OpenAI's: 50,000 requests and a 200 MB
// input file). Chat and embeddings have batches.
func (b Batches) Limits(endpoint string) batch.NativeLimits {
	switch endpoint {
	case batch.EndpointChat, batch.EndpointEmbeddings:
		return batch.NativeLimits{MaxRequests: 50_000, MaxBytes: 200_000_000 - 1<<20}
	}
	return batch.NativeLimits{}
}

// markerKey is the metadata key a batch's marker is stored under.
const markerKey = "modelgate_marker"

// Encode writes one line of the batch input file:
// {"custom_id","method":"POST","url","body"}, the body with its model
// replaced.
func (b Batches) Encode(endpoint, key string, body []byte, model string) ([]byte, error) {
	if b.Model != nil {
		model = b.Model(model)
	}
	req, err := Chat{}.ChatRequest(body, model)
	if err != nil {
		return nil, err
	}
	w := jsonw.New(make([]byte, 0, len(req.Body)+96))
	o := w.Object()
	o.Str("custom_id", key)
	o.Str("method", "POST")
	o.Str("url", b.endpoint(endpoint))
	o.Raw("body", string(req.Body))
	o.End()
	return w.Finish()
}

func (b Batches) endpoint(e string) string {
	if b.Endpoint != nil {
		return b.Endpoint(e)
	}
	return e
}

// Submit uploads the records as a file of purpose batch, named after the
// marker, and creates the batch with the marker in its metadata.
func (b Batches) Submit(ctx context.Context, s *batch.NativeSubmission) (batch.NativeRef, error) {
	fileID, err := b.upload(ctx, s)
	if err != nil {
		return batch.NativeRef{}, err
	}
	w := jsonw.New(nil)
	o := w.Object()
	o.Str("input_file_id", fileID)
	o.Str("endpoint", b.endpoint(s.Endpoint))
	o.Str("completion_window", "24h")
	md := o.Object("metadata")
	md.Str(markerKey, s.Marker)
	md.End()
	o.End()
	body, err := w.Finish()
	if err != nil {
		return batch.NativeRef{}, err
	}
	got, err := b.call(ctx, http.MethodPost, "/batches", body)
	if err != nil {
		return batch.NativeRef{}, err
	}
	id := gjson.GetBytes(got, "id").Str
	if id == "" {
		return batch.NativeRef{}, errors.New("the provider created a batch without an id")
	}
	return batch.NativeRef{ID: id, Data: map[string]string{"input_file_id": fileID}}, nil
}

// upload streams the records to POST /files as multipart/form-data.
func (b Batches) upload(ctx context.Context, s *batch.NativeSubmission) (string, error) {
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	boundary := "modelgate-" + hex.EncodeToString(nonce[:])
	head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n" +
		"--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + s.Marker + ".jsonl\"\r\n" +
		"Content-Type: application/jsonl\r\n\r\n"
	tail := "\r\n--" + boundary + "--\r\n"
	records := s.Records()
	defer func() { _ = records.Close() }() // read only
	req := b.request(http.MethodPost, "/files", nil)
	req.Header = http.Header{"Content-Type": {"multipart/form-data; boundary=" + boundary}}
	req.Upload = io.MultiReader(strings.NewReader(head), records, strings.NewReader(tail))
	req.Length = int64(len(head)) + s.Bytes + int64(len(tail))
	got, err := b.do(ctx, req)
	if err != nil {
		return "", fmt.Errorf("uploading the batch input: %w", err)
	}
	id := gjson.GetBytes(got, "id").Str
	if id == "" {
		return "", errors.New("the provider stored the input file without an id")
	}
	return id, nil
}

// Find pages through the provider's batches, newest first, back to an
// hour before s.Since, for one whose metadata carries the marker.
func (b Batches) Find(ctx context.Context, s *batch.NativeSubmission) (batch.NativeRef, bool, error) {
	after := ""
	oldest := s.Since.Add(-time.Hour).Unix()
	for range 100 {
		path := "/batches?limit=100"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		got, err := b.call(ctx, http.MethodGet, path, nil)
		if err != nil {
			return batch.NativeRef{}, false, err
		}
		data := gjson.GetBytes(got, "data").Array()
		for _, v := range data {
			if v.Get("metadata."+markerKey).Str == s.Marker {
				return batch.NativeRef{ID: v.Get("id").Str, Data: map[string]string{"input_file_id": v.Get("input_file_id").Str}}, true, nil
			}
		}
		if len(data) == 0 || !gjson.GetBytes(got, "has_more").Bool() || data[len(data)-1].Get("created_at").Int() < oldest {
			return batch.NativeRef{}, false, nil
		}
		after = data[len(data)-1].Get("id").Str
	}
	return batch.NativeRef{}, false, errors.New("too many batches to look through")
}

// Poll reads the batch object.
func (b Batches) Poll(ctx context.Context, ref batch.NativeRef) (batch.NativeStatus, error) {
	got, err := b.call(ctx, http.MethodGet, "/batches/"+url.PathEscape(ref.ID), nil)
	if err != nil {
		return batch.NativeStatus{}, err
	}
	f := gjson.GetManyBytes(got, "status", "request_counts.completed", "request_counts.failed", "output_file_id", "error_file_id", "errors.data.0.message")
	st := batch.NativeStatus{Completed: int(f[1].Int()), Failed: int(f[2].Int())}
	switch f[0].Str {
	case "validating", "in_progress", "finalizing", "cancelling":
		st.State = batch.NativeRunning
		return st, nil
	case "completed":
		st.State = batch.NativeCompleted
	case "cancelled":
		st.State = batch.NativeCancelled
	case "expired":
		st.State = batch.NativeExpired
	case "failed":
		st.State, st.Message = batch.NativeFailed, f[5].Str
		if st.Message == "" {
			st.Message = "the provider failed the batch"
		}
		return st, nil
	default:
		return st, fmt.Errorf("the provider's batch has the unknown status %q", f[0].Str)
	}
	data := map[string]string{"input_file_id": ref.Data["input_file_id"]}
	if f[3].Str != "" {
		data["output_file_id"] = f[3].Str
	}
	if f[4].Str != "" {
		data["error_file_id"] = f[4].Str
	}
	st.Ref = batch.NativeRef{ID: ref.ID, Data: data}
	return st, nil
}

// Results reads the output file, then the error file.
func (b Batches) Results(ctx context.Context, ref batch.NativeRef, _ batch.NativeStatus, each func(batch.NativeResult) error) error {
	for _, k := range []string{"output_file_id", "error_file_id"} {
		id := ref.Data[k]
		if id == "" {
			continue
		}
		if err := b.readResults(ctx, id, each); err != nil {
			return err
		}
	}
	return nil
}

// readResults streams one result file's lines.
func (b Batches) readResults(ctx context.Context, fileID string, each func(batch.NativeResult) error) error {
	ans, err := b.Send(ctx, b.request(http.MethodGet, "/files/"+url.PathEscape(fileID)+"/content", nil))
	if err != nil {
		return err
	}
	defer func() { _ = ans.Body.Close() }()
	if ans.Status != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(ans.Body, 64<<10))
		return b.failure(ans.Status, body)
	}
	br := bufio.NewReaderSize(ans.Body, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			if perr := each(ResultLine(line)); perr != nil {
				return perr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ResultLine reads one line of an OpenAI batch output or error file.
func ResultLine(line []byte) batch.NativeResult {
	f := gjson.GetManyBytes(line, "custom_id", "response.status_code", "response.request_id", "response.body", "error.code", "error.message")
	res := batch.NativeResult{Key: f[0].Str}
	if f[1].Exists() && f[1].Int() > 0 {
		res.Status, res.RequestID, res.Body = int(f[1].Int()), f[2].Str, []byte(f[3].Raw)
		if res.Status >= 400 {
			res.Body = providers.ErrorFromBody(res.Status, res.Body).JSON()
		}
		return res
	}
	res.Code, res.Message = f[4].Str, f[5].Str
	if res.Code == "" {
		res.Code = "batch_failed"
	}
	return res
}

// Cancel asks for the batch to be cancelled.
func (b Batches) Cancel(ctx context.Context, ref batch.NativeRef) error {
	_, err := b.call(ctx, http.MethodPost, "/batches/"+url.PathEscape(ref.ID)+"/cancel", nil)
	return err
}

// request builds a request to path (which may carry a query of its own).
func (b Batches) request(method, path string, body []byte) providers.Request {
	path, query, _ := strings.Cut(path, "?")
	if b.Query != "" {
		if query != "" {
			query += "&"
		}
		query += b.Query
	}
	req := providers.Request{Method: method, Path: b.Prefix + path, Query: query, Body: body}
	if body != nil {
		req.Header = jsonHeader
	}
	return req
}

var jsonHeader = http.Header{"Content-Type": {"application/json"}}

// call sends a JSON request and returns the answer's body when it is 2xx.
func (b Batches) call(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	return b.do(ctx, b.request(method, path, body))
}

// maxAnswer bounds the JSON answers read (a page of batches is the
// largest).
const maxAnswer = 16 << 20

func (b Batches) do(ctx context.Context, req providers.Request) ([]byte, error) {
	ans, err := b.Send(ctx, req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = ans.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(ans.Body, maxAnswer))
	if err != nil {
		return nil, err
	}
	if ans.Status < 200 || ans.Status > 299 {
		return nil, b.failure(ans.Status, body)
	}
	return body, nil
}

// failure is a failed answer as an error: a definite refusal for a 4xx
// other than 408, 409 and 429, which may pass.
func (b Batches) failure(status int, body []byte) error {
	msg := providers.ErrorFromBody(status, body).Message
	switch {
	case status >= 400 && status < 500 && status != 408 && status != 409 && status != 429:
		return &batch.NativeRefusal{Status: status, Message: msg}
	}
	return fmt.Errorf("the provider answered %s: %s", strconv.Itoa(status), msg)
}

var _ batch.NativeAPI = Batches{}
