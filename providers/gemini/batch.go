package gemini

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Batches is the Gemini Developer API's batch mode as the batch engine's
// NativeAPI: models/{model}:batchGenerateContent with the requests
// inline, each a GenerateContentRequest translated as a live request is;
// its answers, inline in the batch operation, become chat.completions.
// Inline requests must stay under 20 MB, so a part is at most that large.
type Batches struct {
	// Send carries the requests to the provider.
	Send providers.Send
	// Chat translates the requests and the answers (Developer API: not
	// Vertex).
	Chat Chat
}

// Limits per batch: inline requests under 20 MB. Only chat has batches
// here.
func (b Batches) Limits(endpoint string) batch.NativeLimits {
	if endpoint != batch.EndpointChat || b.Chat.Vertex {
		return batch.NativeLimits{}
	}
	return batch.NativeLimits{MaxRequests: 50_000, MaxBytes: 19_000_000}
}

// Encode writes one inline request: {"request", "metadata": {"key"}}.
func (b Batches) Encode(_, key string, body []byte, model string) ([]byte, error) {
	req, err := b.Chat.ChatRequest(body, model)
	if err != nil {
		return nil, err
	}
	w := jsonw.New(make([]byte, 0, len(req.Body)+48))
	o := w.Object()
	o.Raw("request", string(req.Body))
	md := o.Object("metadata")
	md.Str("key", key)
	md.End()
	o.End()
	return w.Finish()
}

// Submit creates the batch, its requests inline, named after the marker.
func (b Batches) Submit(ctx context.Context, s *batch.NativeSubmission) (batch.NativeRef, error) {
	path, err := b.Chat.path(s.Model, false)
	if err != nil {
		return batch.NativeRef{}, &batch.NativeRefusal{Status: http.StatusBadRequest, Message: err.Error()}
	}
	path = strings.TrimSuffix(path, ":generateContent") + ":batchGenerateContent"
	head := `{"batch":{"displayName":"` + s.Marker + `","inputConfig":{"requests":{"requests":[`
	const tail = `]}}}}`
	records := s.Records()
	defer func() { _ = records.Close() }() // read only
	req := providers.Request{Method: http.MethodPost, Path: path, Header: jsonHeader,
		Upload: io.MultiReader(strings.NewReader(head), providers.JoinLines(records), strings.NewReader(tail)),
		Length: int64(len(head)) + s.Bytes - 1 + int64(len(tail))}
	got, err := b.do(ctx, req)
	if err != nil {
		return batch.NativeRef{}, err
	}
	name := gjson.GetBytes(got, "name").Str
	if !strings.HasPrefix(name, "batches/") {
		return batch.NativeRef{}, errors.New("the provider created a batch without a name")
	}
	return batch.NativeRef{ID: name}, nil
}

var jsonHeader = http.Header{"Content-Type": {"application/json"}}

// Find pages through the provider's batches for one named after the
// marker.
func (b Batches) Find(ctx context.Context, s *batch.NativeSubmission) (batch.NativeRef, bool, error) {
	token := ""
	for range 100 {
		q := "pageSize=100"
		if token != "" {
			q += "&pageToken=" + url.QueryEscape(token)
		}
		got, err := b.do(ctx, providers.Request{Method: http.MethodGet, Path: "/batches", Query: q})
		if err != nil {
			return batch.NativeRef{}, false, err
		}
		for _, op := range gjson.GetBytes(got, "operations").Array() {
			if op.Get("metadata.displayName").Str == s.Marker {
				return batch.NativeRef{ID: op.Get("name").Str}, true, nil
			}
		}
		if token = gjson.GetBytes(got, "nextPageToken").Str; token == "" {
			return batch.NativeRef{}, false, nil
		}
	}
	return batch.NativeRef{}, false, errors.New("too many batches to look through")
}

// Poll reads the batch's operation.
func (b Batches) Poll(ctx context.Context, ref batch.NativeRef) (batch.NativeStatus, error) {
	got, err := b.get(ctx, ref)
	if err != nil {
		return batch.NativeStatus{}, err
	}
	md := gjson.GetBytes(got, "metadata")
	st := batch.NativeStatus{Completed: int(md.Get("batchStats.successfulRequestCount").Int()), Failed: int(md.Get("batchStats.failedRequestCount").Int())}
	switch s := md.Get("state").Str; s {
	case "BATCH_STATE_PENDING", "BATCH_STATE_RUNNING", "BATCH_STATE_UNSPECIFIED", "":
		st.State = batch.NativeRunning
	case "BATCH_STATE_SUCCEEDED":
		st.State = batch.NativeCompleted
	case "BATCH_STATE_CANCELLED":
		st.State = batch.NativeCancelled
	case "BATCH_STATE_EXPIRED":
		st.State = batch.NativeExpired
	case "BATCH_STATE_FAILED":
		st.State, st.Message = batch.NativeFailed, gjson.GetBytes(got, "error.message").Str
		if st.Message == "" {
			st.Message = "the provider failed the batch"
		}
	default:
		return st, fmt.Errorf("the provider's batch has the unknown state %q", s)
	}
	return st, nil
}

// Results reads the answers inline in the batch's operation.
func (b Batches) Results(ctx context.Context, ref batch.NativeRef, _ batch.NativeStatus, each func(batch.NativeResult) error) error {
	got, err := b.get(ctx, ref)
	if err != nil {
		return err
	}
	out := gjson.GetBytes(got, "response.inlinedResponses.inlinedResponses")
	if !out.Exists() {
		out = gjson.GetBytes(got, "metadata.output.inlinedResponses.inlinedResponses")
	}
	if !out.Exists() && gjson.GetBytes(got, "metadata.output.responsesFile").Exists() {
		return errors.New("the provider put the results in a file; only inline results are read")
	}
	var perr error
	out.ForEach(func(_, r gjson.Result) bool {
		perr = each(b.result(r))
		return perr == nil
	})
	return perr
}

// result reads one inline response.
func (b Batches) result(r gjson.Result) batch.NativeResult {
	res := batch.NativeResult{Key: r.Get("metadata.key").Str}
	if e := r.Get("error"); e.Exists() {
		status := int(e.Get("code").Int())
		if status < 400 {
			status = statusOf(e.Get("status").Str)
		}
		pe := b.Chat.Error(status, nil, []byte(`{"error":`+e.Raw+`}`))
		res.Status, res.Body = pe.Status, pe.JSON()
		return res
	}
	body, _, err := b.Chat.ChatResponse([]byte(r.Get("response").Raw))
	if err != nil {
		e := &providers.Error{Status: http.StatusBadGateway, Type: "server_error", Message: "the provider's answer could not be read"}
		res.Status, res.Body = e.Status, e.JSON()
		return res
	}
	res.Status, res.Body, res.RequestID = http.StatusOK, body, r.Get("response.responseId").Str
	return res
}

// Cancel asks for the batch to be cancelled.
func (b Batches) Cancel(ctx context.Context, ref batch.NativeRef) error {
	path, err := batchPath(ref)
	if err != nil {
		return err
	}
	_, err = b.do(ctx, providers.Request{Method: http.MethodPost, Path: path + ":cancel"})
	return err
}

func (b Batches) get(ctx context.Context, ref batch.NativeRef) ([]byte, error) {
	path, err := batchPath(ref)
	if err != nil {
		return nil, err
	}
	return b.do(ctx, providers.Request{Method: http.MethodGet, Path: path})
}

// batchPath is the path of the batch ref names ("batches/<id>").
func batchPath(ref batch.NativeRef) (string, error) {
	id, ok := strings.CutPrefix(ref.ID, "batches/")
	if !ok || !validSegment(id) {
		return "", fmt.Errorf("%q is not a batch's name", ref.ID)
	}
	return "/" + ref.ID, nil
}

func (b Batches) do(ctx context.Context, req providers.Request) ([]byte, error) {
	ans, err := b.Send(ctx, req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = ans.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(ans.Body, 512<<20))
	if err != nil {
		return nil, err
	}
	if ans.Status < 200 || ans.Status > 299 {
		msg := gjson.GetBytes(body, "error.message").Str
		if ans.Status >= 400 && ans.Status < 500 && ans.Status != 408 && ans.Status != 409 && ans.Status != 429 {
			return nil, &batch.NativeRefusal{Status: ans.Status, Message: msg}
		}
		return nil, fmt.Errorf("the provider answered %d: %s", ans.Status, msg)
	}
	return body, nil
}

var _ batch.NativeAPI = Batches{}
