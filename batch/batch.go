package batch

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/modelgate/modelgate/internal/ids"
	"github.com/modelgate/modelgate/internal/storage"
)

// Statuses of a batch, OpenAI's.
const (
	StatusValidating = "validating"
	StatusFailed     = "failed"
	StatusInProgress = "in_progress"
	StatusFinalizing = "finalizing"
	StatusCompleted  = "completed"
	StatusExpired    = "expired"
	StatusCancelling = "cancelling"
	StatusCancelled  = "cancelled"
)

// Endpoints batches run.
const (
	EndpointChat       = "/v1/chat/completions"
	EndpointRerank     = "/v1/rerank"
	EndpointEmbeddings = "/v1/embeddings"
)

// Batch is OpenAI's Batch object.
type Batch struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Model            string            `json:"model,omitempty"`
	Errors           *Errors           `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    RequestCounts     `json:"request_counts"`
	Usage            *Usage            `json:"usage,omitempty"`
	Metadata         map[string]string `json:"metadata"`
}

// Errors lists why a batch's input was refused.
type Errors struct {
	Object string       `json:"object"`
	Data   []ErrorEntry `json:"data"`
}

// ErrorEntry is one reason, with the 1-based input line when it is a line's.
type ErrorEntry struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

// RequestCounts counts a batch's requests. Completed and Failed are the
// lines of the output and the error file so far.
type RequestCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// Usage sums the token usage of a batch's answered chat and embeddings
// requests.
type Usage struct {
	InputTokens         int64        `json:"input_tokens"`
	InputTokensDetails  CachedTokens `json:"input_tokens_details"`
	OutputTokens        int64        `json:"output_tokens"`
	OutputTokensDetails ReasonTokens `json:"output_tokens_details"`
	TotalTokens         int64        `json:"total_tokens"`
}

// CachedTokens is Usage's input detail.
type CachedTokens struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// ReasonTokens is Usage's output detail.
type ReasonTokens struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

func (u *Usage) add(o Usage) {
	u.InputTokens += o.InputTokens
	u.InputTokensDetails.CachedTokens += o.InputTokensDetails.CachedTokens
	u.OutputTokens += o.OutputTokens
	u.OutputTokensDetails.ReasoningTokens += o.OutputTokensDetails.ReasoningTokens
	u.TotalTokens += o.TotalTokens
}

// batchRecord is what batch.json holds.
type batchRecord struct {
	Batch
	Owner string `json:"owner"`
	// Models limits the lines to these models (CreateParams.Models).
	Models []string `json:"models,omitempty"`
	// KeyID and KeyName are the key that created the batch
	// (CreateParams), which its lines are accounted to.
	KeyID   string `json:"key_id,omitempty"`
	KeyName string `json:"key_name,omitempty"`
	// Window is the completion window in effect, in milliseconds.
	Window int64 `json:"window_ms"`
	// Deadline is when the window ends, in Unix milliseconds: expires_at
	// is whole seconds, cut down, and would end a window up to a second
	// early (a window under a second at once).
	Deadline int64 `json:"deadline_ms,omitempty"`
	// OutputExpiresAfter is how long the output and error files are to
	// be kept after they are written, in seconds (CreateParams); 0: as
	// Settings.OutputRetention says.
	OutputExpiresAfter int64 `json:"output_expires_after_s,omitempty"`
}

// deadline is when rec's completion window ends.
func (b *batchRecord) deadline() (time.Time, bool) {
	switch {
	case b.Deadline > 0:
		return time.UnixMilli(b.Deadline), true
	case b.ExpiresAt != nil: // a record from before deadline_ms
		return time.Unix(*b.ExpiresAt, 0), true
	}
	return time.Time{}, false
}

func (b *batchRecord) terminal() bool {
	switch b.Status {
	case StatusFailed, StatusCompleted, StatusExpired, StatusCancelled:
		return true
	}
	return false
}

// CreateParams are the fields of POST /v1/batches.
type CreateParams struct {
	InputFileID      string
	Endpoint         string
	CompletionWindow string
	Metadata         map[string]string
	// Models, when not empty, limits the batch to these models: those the
	// creating key may use. Validation refuses lines for others.
	Models []string
	// KeyID and KeyName name the creating key, for the executor: its
	// lines count against that key's budget and are accounted to it.
	// Opaque to this package.
	KeyID, KeyName string
	// Window is how long the batch may run; the caller derives it from
	// CompletionWindow and its own limit.
	Window time.Duration
	// OutputExpiresAfter, when positive, is how long the output and
	// error files are kept after they are written (OpenAI's
	// output_expires_after, anchored at their created_at), unless
	// Settings.OutputRetention is shorter.
	OutputExpiresAfter time.Duration
}

// InvalidError is a request the API refuses (400), naming the parameter.
type InvalidError struct {
	Param   string
	Message string
}

func (e *InvalidError) Error() string { return e.Message }

// CreateBatch records a new batch of owner in the validating state; a
// Runner validates and runs it.
func (s *Store) CreateBatch(ctx context.Context, owner string, p CreateParams) (Batch, error) {
	switch p.Endpoint {
	case EndpointChat, EndpointRerank, EndpointEmbeddings:
	default:
		return Batch{}, &InvalidError{Param: "endpoint",
			Message: fmt.Sprintf("endpoint %q is not supported: use %s, %s or %s", p.Endpoint, EndpointChat, EndpointEmbeddings, EndpointRerank)}
	}
	if err := checkMetadata(p.Metadata); err != nil {
		return Batch{}, err
	}
	if p.Window <= 0 {
		return Batch{}, &InvalidError{Param: "completion_window", Message: "completion_window must be positive"}
	}
	f, err := s.GetFile(ctx, owner, p.InputFileID)
	if errors.Is(err, ErrNotFound) {
		return Batch{}, &InvalidError{Param: "input_file_id", Message: fmt.Sprintf("no file with id %q", p.InputFileID)}
	}
	if err != nil {
		return Batch{}, err
	}
	if f.Purpose != PurposeBatch {
		return Batch{}, &InvalidError{Param: "input_file_id",
			Message: fmt.Sprintf("file %s has purpose %q; a batch's input needs purpose %q", f.ID, f.Purpose, PurposeBatch)}
	}
	now := s.now()
	rec := batchRecord{
		Batch: Batch{
			ID: ids.New("batch_", now), Object: "batch", Endpoint: p.Endpoint,
			InputFileID: p.InputFileID, CompletionWindow: p.CompletionWindow,
			Status: StatusValidating, CreatedAt: now.Unix(), ExpiresAt: ptr(now.Add(p.Window).Unix()),
			Metadata: p.Metadata,
		},
		Owner:              owner,
		Models:             p.Models,
		KeyID:              p.KeyID,
		KeyName:            p.KeyName,
		Window:             p.Window.Milliseconds(),
		Deadline:           now.Add(p.Window).UnixMilli(),
		OutputExpiresAfter: seconds(max(p.OutputExpiresAfter, 0)),
	}
	if err := s.storeJSON(ctx, path.Join(s.batchDir(owner, rec.ID), "batch.json"), rec); err != nil {
		return Batch{}, err
	}
	if err := s.storage.Store(ctx, s.activeKey(rec.ID), []byte(owner)); err != nil {
		return Batch{}, err
	}
	return rec.Batch, nil
}

func checkMetadata(m map[string]string) error {
	if len(m) > 16 {
		return &InvalidError{Param: "metadata", Message: "metadata holds at most 16 pairs"}
	}
	for k, v := range m {
		if len(k) > 64 {
			return &InvalidError{Param: "metadata", Message: "metadata keys are at most 64 characters"}
		}
		if len(v) > 512 {
			return &InvalidError{Param: "metadata", Message: "metadata values are at most 512 characters"}
		}
	}
	return nil
}

// GetBatch returns owner's batch id as it stands: while it runs, the
// request counts are those of the latest progress every instance reported.
func (s *Store) GetBatch(ctx context.Context, owner, id string) (Batch, error) {
	rec, err := s.batchRecord(ctx, owner, id)
	if err != nil {
		return Batch{}, err
	}
	return s.present(ctx, rec)
}

func (s *Store) batchRecord(ctx context.Context, owner, id string) (*batchRecord, error) {
	if !ids.Valid(id, "batch_") {
		return nil, ErrNotFound
	}
	rec := new(batchRecord)
	err := s.loadJSON(ctx, path.Join(s.batchDir(owner, id), "batch.json"), rec)
	if storage.IsNotExist(err) || err == nil && rec.Owner != owner {
		return nil, ErrNotFound
	}
	return rec, err
}

// present fills in what a running batch's record does not hold: the
// progress of its parts and a cancel that was asked for.
func (s *Store) present(ctx context.Context, rec *batchRecord) (Batch, error) {
	b := rec.Batch
	if rec.terminal() {
		return b, nil
	}
	if b.Status != StatusCancelling {
		if at, _, ok := s.cancelAsked(ctx, rec); ok {
			b.Status, b.CancellingAt = StatusCancelling, &at
		}
	}
	if rec.InProgressAt == nil {
		return b, nil // not validated (maybe cancelled before): no claims yet
	}
	c, err := s.loadClaims(ctx, rec)
	if storage.IsNotExist(err) {
		return b, nil // the batch ended just now and its claims are gone
	}
	if err != nil {
		return Batch{}, err
	}
	b.RequestCounts.Completed, b.RequestCounts.Failed = c.progress()
	return b, nil
}

// ListBatches returns a page of owner's batches, newest first.
func (s *Store) ListBatches(ctx context.Context, owner string, opt ListOptions) (Page[Batch], error) {
	ids, err := s.list(ctx, path.Join(s.ownerDir(owner), "batches"))
	if err != nil {
		return Page[Batch]{}, err
	}
	var page Page[Batch]
	err = walkIDs(ids, opt, func(id string) (bool, error) {
		rec, err := s.batchRecord(ctx, owner, id)
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if len(page.Data) == opt.Limit {
			page.HasMore = true
			return true, nil
		}
		b, err := s.present(ctx, rec)
		page.Data = append(page.Data, b)
		return false, err
	})
	return page, err
}

// ErrNotCancellable is returned when cancelling a batch that already ended
// other than cancelled.
var ErrNotCancellable = errors.New("batch cannot be cancelled")

// CancelBatch asks for owner's batch id to be cancelled and returns it in
// the cancelling state (or cancelled, if it already is). The runners see the
// request within their poll interval, stop its work, and finish it with its
// finished results kept.
func (s *Store) CancelBatch(ctx context.Context, owner, id string) (Batch, error) {
	rec, err := s.batchRecord(ctx, owner, id)
	if err != nil {
		return Batch{}, err
	}
	if rec.Status == StatusCancelled {
		return rec.Batch, nil
	}
	if rec.terminal() {
		return Batch{}, ErrNotCancellable
	}
	if err := s.askCancel(ctx, rec, ""); err != nil {
		return Batch{}, err
	}
	return s.present(ctx, rec)
}

// CancelKeyRevoked is the code of the errors a batch's unfinished lines end
// with when the batch was cancelled because the key that created it was
// revoked (deleted, or no longer known): Live.KeyGone said so, or the
// executor answered a line with Response.KeyGone.
const CancelKeyRevoked = "key_revoked"

// askCancel stores the request to cancel rec, unless one is stored
// already: the runners of every instance sharing the storage see it at
// their next step. reason is "" for the owner's own cancel, else the code
// its unfinished lines end with (CancelKeyRevoked).
func (s *Store) askCancel(ctx context.Context, rec *batchRecord, reason string) error {
	if _, _, ok := s.cancelAsked(ctx, rec); ok {
		return nil
	}
	// "<unix seconds>[ <reason>]": a runner that reads only the number
	// still cancels.
	v := itoa(int(s.now().Unix()))
	if reason != "" {
		v += " " + reason
	}
	return s.storage.Store(ctx, path.Join(s.batchDir(rec.Owner, rec.ID), "cancel"), []byte(v))
}

// cancelAsked returns when a cancel of rec was asked for and why ("" for
// its owner's), if one was.
func (s *Store) cancelAsked(ctx context.Context, rec *batchRecord) (at int64, reason string, ok bool) {
	b, err := s.storage.Load(ctx, path.Join(s.batchDir(rec.Owner, rec.ID), "cancel"))
	if err != nil {
		return 0, "", false
	}
	num, reason, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	_, _ = fmt.Sscan(num, &at)
	return at, reason, true
}

func ptr[T any](v T) *T { return &v }
