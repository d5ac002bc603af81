package anthropic

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Batches is Anthropic's Message Batches API as the batch engine's
// NativeAPI: a unified chat line becomes a Messages request of the batch
// (translated as a live request is), and its result a chat.completion.
type Batches struct {
	// Send carries the requests to the provider.
	Send providers.Send
	// Chat translates the requests and the answers.
	Chat Chat
}

// Limits per batch: Anthropic's 100,000 requests or 256 MB. Only chat
// has batches.
func (b Batches) Limits(endpoint string) batch.NativeLimits {
	if endpoint != batch.EndpointChat {
		return batch.NativeLimits{}
	}
	return batch.NativeLimits{MaxRequests: 100_000, MaxBytes: 256_000_000 - 1<<20}
}

// Encode writes one request of the batch: {"custom_id","params"}.
func (b Batches) Encode(_, key string, body []byte, model string) ([]byte, error) {
	req, err := b.Chat.ChatRequest(body, model)
	if err != nil {
		return nil, err
	}
	w := jsonw.New(make([]byte, 0, len(req.Body)+48))
	o := w.Object()
	o.Str("custom_id", key)
	o.Raw("params", string(req.Body))
	o.End()
	return w.Finish()
}

const batchesPath = "/v1/messages/batches"

// Submit creates the batch, its requests inline: the body is streamed
// from the records, each custom_id tagged with the part's marker (the
// Message Batches API keeps no metadata: the results tell the part's
// requests from any other batch's).
func (b Batches) Submit(ctx context.Context, s *batch.NativeSubmission) (batch.NativeRef, error) {
	if s.Count == 0 {
		return batch.NativeRef{}, errors.New("no requests to submit")
	}
	const head, tail = `{"requests":[`, `]}`
	records := s.Records()
	defer func() { _ = records.Close() }() // read only
	tag := markerTag(s.Marker)
	req := b.request(http.MethodPost, batchesPath, nil)
	req.Header = http.Header{"Anthropic-Version": req.Header["Anthropic-Version"], "Content-Type": {"application/json"}}
	req.Upload = io.MultiReader(strings.NewReader(head), providers.JoinLines(tagIDs(records, tag)), strings.NewReader(tail))
	req.Length = int64(len(head)) + s.Bytes + int64(s.Count*len(tag)) - 1 + int64(len(tail))
	got, err := b.do(ctx, req)
	if err != nil {
		return batch.NativeRef{}, err
	}
	id := gjson.GetBytes(got, "id").Str
	if id == "" {
		return batch.NativeRef{}, errors.New("the provider created a batch without an id")
	}
	return markedRef(id, s.Marker), nil
}

// markerTag is what Submit writes before each custom_id of the part
// marked marker: "<marker>-", within Anthropic's 64 characters of
// [a-zA-Z0-9_-] with the request's index.
func markerTag(marker string) string { return marker + "-" }

// markedRef is the reference of provider batch id of the part marked
// marker: Results reads only the requests tagged with it.
func markedRef(id, marker string) batch.NativeRef {
	return batch.NativeRef{ID: id, Data: map[string]string{"marker": marker}}
}

// Find looks, among the provider's batches created from a minute before
// s.Since on, for the one of s.Count requests that Submit may have
// created. The Message Batches API keeps no metadata, so the time and
// the size tell the batch: one that has ended must carry the part's
// tagged custom_ids in its results, and of several still running none is
// taken (a second submission costs more; another batch's results would
// answer none of the part's requests).
func (b Batches) Find(ctx context.Context, s *batch.NativeSubmission) (batch.NativeRef, bool, error) {
	from := s.Since.Add(-time.Minute)
	tag := markerTag(s.Marker)
	after, running := "", []string(nil)
	for page := 0; ; page++ {
		if page == 100 {
			return batch.NativeRef{}, false, errors.New("too many batches to look through")
		}
		path := batchesPath + "?limit=100"
		if after != "" {
			path += "&after_id=" + url.QueryEscape(after)
		}
		got, err := b.call(ctx, http.MethodGet, path, nil)
		if err != nil {
			return batch.NativeRef{}, false, err
		}
		data := gjson.GetBytes(got, "data").Array()
		for _, v := range data {
			created, err := time.Parse(time.RFC3339, v.Get("created_at").Str)
			if err != nil || created.Before(from) {
				continue
			}
			c := v.Get("request_counts")
			total := c.Get("processing").Int() + c.Get("succeeded").Int() + c.Get("errored").Int() + c.Get("canceled").Int() + c.Get("expired").Int()
			if int(total) != s.Count {
				continue
			}
			id := v.Get("id").Str
			if v.Get("processing_status").Str != "ended" {
				running = append(running, id)
				continue
			}
			ours, err := b.tagged(ctx, id, tag)
			if err != nil {
				return batch.NativeRef{}, false, err
			}
			if ours {
				return markedRef(id, s.Marker), true, nil
			}
		}
		if len(data) == 0 || !gjson.GetBytes(got, "has_more").Bool() {
			break
		}
		if t, err := time.Parse(time.RFC3339, data[len(data)-1].Get("created_at").Str); err == nil && t.Before(from) {
			break
		}
		if after = gjson.GetBytes(got, "last_id").Str; after == "" {
			break
		}
	}
	if len(running) != 1 {
		return batch.NativeRef{}, false, nil
	}
	return markedRef(running[0], s.Marker), true, nil
}

// tagged reports whether the first result of ended batch id is one of a
// request tagged tag.
func (b Batches) tagged(ctx context.Context, id, tag string) (bool, error) {
	results, err := b.results(ctx, id)
	if err != nil {
		return false, err
	}
	defer func() { _ = results.Close() }()
	line, err := bufio.NewReaderSize(results, 64<<10).ReadSlice('\n')
	if len(line) == 0 && err != nil {
		return false, nil //nolint:nilerr // no result to read: not the part's
	}
	return strings.HasPrefix(gjson.GetBytes(line, "custom_id").Str, tag), nil
}

// results opens the results of ended batch id (JSONL, in no order).
func (b Batches) results(ctx context.Context, id string) (io.ReadCloser, error) {
	ans, err := b.Send(ctx, b.request(http.MethodGet, batchesPath+"/"+url.PathEscape(id)+"/results", nil))
	if err != nil {
		return nil, err
	}
	if ans.Status != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(ans.Body, 64<<10))
		_ = ans.Body.Close()
		return nil, failure(ans.Status, body)
	}
	return ans.Body, nil
}

// idPrefix is how every record Encode writes begins.
const idPrefix = `{"custom_id":"`

// taggedIDs reads records, one per line as Encode writes them, with tag
// written before each custom_id.
type taggedIDs struct {
	r     *bufio.Reader
	open  []byte // idPrefix and the tag; out reslices it, never writes it
	out   []byte // what is read before more of r: open, or a line of r's buffer
	start bool   // r is at the start of a line
}

func tagIDs(records io.Reader, tag string) io.Reader {
	return &taggedIDs{r: bufio.NewReaderSize(records, 64<<10), open: []byte(idPrefix + tag), start: true}
}

func (t *taggedIDs) Read(p []byte) (int, error) {
	if len(t.out) == 0 {
		if err := t.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, t.out)
	t.out = t.out[n:]
	return n, nil
}

// next sets out to what comes next: at the start of a record, its
// opening with the tag; else the line up to its newline (or as much of
// it as r buffers), read in place: out is read to its end before r is
// read again.
func (t *taggedIDs) next() error {
	if t.start {
		t.start = false
		if head, _ := t.r.Peek(len(idPrefix)); string(head) == idPrefix {
			_, _ = t.r.Discard(len(idPrefix))
			t.out = t.open
			return nil
		}
	}
	chunk, err := t.r.ReadSlice('\n')
	if len(chunk) == 0 {
		return err
	}
	t.start = chunk[len(chunk)-1] == '\n'
	t.out = chunk
	return nil
}

// Poll reads the batch. Its counts stay at processing until it ends.
func (b Batches) Poll(ctx context.Context, ref batch.NativeRef) (batch.NativeStatus, error) {
	got, err := b.call(ctx, http.MethodGet, batchesPath+"/"+url.PathEscape(ref.ID), nil)
	if err != nil {
		return batch.NativeStatus{}, err
	}
	f := gjson.GetManyBytes(got, "processing_status", "request_counts.succeeded", "request_counts.errored", "cancel_initiated_at")
	st := batch.NativeStatus{Completed: int(f[1].Int()), Failed: int(f[2].Int())}
	switch f[0].Str {
	case "in_progress", "canceling":
		st.State = batch.NativeRunning
	case "ended":
		st.State = batch.NativeCompleted
		if f[3].Type == gjson.String {
			st.State = batch.NativeCancelled
		}
	default:
		return st, fmt.Errorf("the provider's batch has the unknown processing_status %q", f[0].Str)
	}
	return st, nil
}

// Results streams the batch's results (JSONL, in no order).
func (b Batches) Results(ctx context.Context, ref batch.NativeRef, _ batch.NativeStatus, each func(batch.NativeResult) error) error {
	results, err := b.results(ctx, ref.ID)
	if err != nil {
		return err
	}
	defer func() { _ = results.Close() }()
	// A batch Submit tagged answers only the requests with its tag; one
	// submitted before custom_ids were tagged, every request.
	tag := ""
	if m := ref.Data["marker"]; m != "" {
		tag = markerTag(m)
	}
	br := bufio.NewReaderSize(results, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			res := b.ResultLine(line)
			key, ours := strings.CutPrefix(res.Key, tag)
			if ours {
				res.Key = key
				if perr := each(res); perr != nil {
					return perr
				}
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

// ResultLine reads one line of a batch's results into a unified result:
// a succeeded message becomes a chat.completion, an errored request the
// unified error of its status.
func (b Batches) ResultLine(line []byte) batch.NativeResult {
	f := gjson.GetManyBytes(line, "custom_id", "result.type", "result.message", "result.error")
	res := batch.NativeResult{Key: f[0].Str}
	switch f[1].Str {
	case "succeeded":
		body, _, err := b.Chat.ChatResponse([]byte(f[2].Raw))
		if err != nil {
			e := &providers.Error{Status: http.StatusBadGateway, Type: "server_error", Message: "the provider's answer could not be read"}
			res.Status, res.Body = e.Status, e.JSON()
			return res
		}
		res.Status, res.Body, res.RequestID = http.StatusOK, body, f[2].Get("id").Str
	case "errored":
		status := errorStatus(f[3].Get("error.type").Str)
		e := b.Chat.Error(status, nil, []byte(f[3].Raw))
		res.Status, res.Body, res.RequestID = e.Status, e.JSON(), f[3].Get("request_id").Str
	case "canceled":
		res.Code, res.Message = "batch_cancelled", "This request was not executed because the batch was cancelled."
	case "expired":
		res.Code, res.Message = "batch_expired", "This request could not be executed before the completion window expired."
	default:
		res.Code, res.Message = "result_missing", "The provider's result for this request could not be read."
	}
	return res
}

// errorStatus is the status Anthropic answers an error type with.
func errorStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return 400
	case "authentication_error":
		return 401
	case "billing_error":
		return 402
	case "permission_error":
		return 403
	case "not_found_error":
		return 404
	case "request_too_large":
		return 413
	case "rate_limit_error":
		return 429
	case "overloaded_error":
		return 529
	}
	return 500
}

// Cancel asks for the batch to be cancelled.
func (b Batches) Cancel(ctx context.Context, ref batch.NativeRef) error {
	_, err := b.call(ctx, http.MethodPost, batchesPath+"/"+url.PathEscape(ref.ID)+"/cancel", nil)
	return err
}

func (b Batches) request(method, path string, body []byte) providers.Request {
	path, query, _ := strings.Cut(path, "?")
	return providers.Request{Method: method, Path: path, Query: query, Body: body, Header: versionHeader(b.Chat.Version)}
}

func (b Batches) call(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	return b.do(ctx, b.request(method, path, body))
}

func (b Batches) do(ctx context.Context, req providers.Request) ([]byte, error) {
	ans, err := b.Send(ctx, req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = ans.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(ans.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if ans.Status < 200 || ans.Status > 299 {
		return nil, failure(ans.Status, body)
	}
	return body, nil
}

// failure is a failed answer as an error: a definite refusal for a 4xx
// other than 408, 409 and 429.
func failure(status int, body []byte) error {
	_, msg := providers.ErrorTypeMessage(body)
	if status >= 400 && status < 500 && status != 408 && status != 409 && status != 429 {
		return &batch.NativeRefusal{Status: status, Message: msg}
	}
	return fmt.Errorf("the provider answered %d: %s", status, msg)
}

var _ batch.NativeAPI = Batches{}
