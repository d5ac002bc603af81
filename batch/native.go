package batch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"
)

// Batch modes of a provider: where the lines a batch sends it run.
const (
	// ModeNative hands a provider's lines to its own batch API, at its
	// batch price, as one provider batch per part.
	ModeNative = "native"
	// ModeGateway runs them in the gateway, one live request at a time.
	ModeGateway = "gateway"
)

// nativeTypes are the provider types whose API has batches: their
// batch mode is native unless the configuration says otherwise.
var nativeTypes = map[string]bool{
	"openai": true, "azure_openai": true, "anthropic": true, "gemini": true, "vertex": true, "bedrock": true,
}

// DefaultMode is the batch mode of a provider of type providerType that
// its configuration leaves unset: native for the types whose API has
// batches, gateway for the rest.
func DefaultMode(providerType string) string {
	if nativeTypes[providerType] {
		return ModeNative
	}
	return ModeGateway
}

// ParseMode checks a configured batch mode: "native", "gateway", or ""
// (the type's default).
func ParseMode(s string) (string, error) {
	switch s {
	case "", ModeNative, ModeGateway:
		return s, nil
	}
	return "", fmt.Errorf("batch mode %q: use %s or %s", s, ModeNative, ModeGateway)
}

// NativeAPI is one provider's own batch API, as the engine drives it.
// Its implementations live with the provider's translators (packages
// providers/<family>), and send every request through the transport the
// host gives them: no provider I/O bypasses the host.
//
// The engine calls Submit at most once per part unless Find, asked
// first, reports that the provider has no batch with the part's marker:
// a part is never submitted twice.
type NativeAPI interface {
	// Limits are the most (and fewest) requests, and the most bytes of
	// records, one provider batch of endpoint takes. A zero MaxRequests
	// says the API does not take the endpoint: its lines run in the
	// gateway.
	Limits(endpoint string) NativeLimits

	// Encode returns the provider's batch record of one request: body,
	// a unified request to endpoint, translated for model (the
	// provider's own name of it), keyed key. The record is one line of
	// JSON. An error means the request cannot go in a provider batch; it
	// then runs in the gateway, where it gets the answer a live request
	// would.
	Encode(endpoint, key string, body []byte, model string) ([]byte, error)

	// Submit creates a provider batch of the records of s, tagged with
	// s.Marker so that Find can tell it again, and returns its reference.
	// A *NativeRefusal says the provider will not take these records as a
	// batch (the part then runs in the gateway); any other error may be
	// passing, and the engine asks Find, then Submit, again later.
	Submit(ctx context.Context, s *NativeSubmission) (NativeRef, error)

	// Find looks for the provider batch tagged s.Marker that a Submit of
	// s, cut short by a crash or a failure, may have created, and
	// returns it when it exists.
	Find(ctx context.Context, s *NativeSubmission) (NativeRef, bool, error)

	// Poll returns the state of a provider batch.
	Poll(ctx context.Context, ref NativeRef) (NativeStatus, error)

	// Results calls each with the result of every request of an ended
	// provider batch that has one, in the provider's order, streamed;
	// st is the status Poll returned when it ended.
	Results(ctx context.Context, ref NativeRef, st NativeStatus, each func(NativeResult) error) error

	// Cancel asks the provider to cancel a batch; its finished requests
	// keep their results, which Results returns once it has ended.
	Cancel(ctx context.Context, ref NativeRef) error
}

// NativeLimits bound one provider batch.
type NativeLimits struct {
	// MinRequests is the fewest requests a provider batch takes (Bedrock
	// wants 100): a smaller part runs in the gateway.
	MinRequests int
	// MaxRequests is the most requests one provider batch takes; 0: the
	// endpoint has no native batches.
	MaxRequests int
	// MaxBytes is the most bytes of records (each with its newline) one
	// provider batch takes.
	MaxBytes int64
}

// NativeSubmission is a part on its way to a provider batch.
type NativeSubmission struct {
	// Marker tags the provider batch (its metadata, display name, job
	// name or idempotency token): at most 40 characters of [a-z0-9-],
	// the same for every attempt at the part.
	Marker string
	// Endpoint is the batch's endpoint; Model the provider's model every
	// record names.
	Endpoint, Model string
	// Count is the number of records; Bytes their size, each with its
	// newline.
	Count int
	Bytes int64
	// Since is when the engine stored its intent to submit: a provider
	// batch of the part is not older.
	Since time.Time
	// Records returns the records, one per line, streamed from the
	// engine's storage; each call starts from the first.
	Records func() io.ReadCloser
}

// NativeRef names a provider batch and whatever else the provider needs
// later (its input file, where its results go). The engine stores it
// with the part.
type NativeRef struct {
	ID   string            `json:"id"`
	Data map[string]string `json:"data,omitempty"`
}

// States of a provider batch, as NativeStatus reports them.
const (
	NativeRunning   = "running"
	NativeCompleted = "completed"
	NativeCancelled = "cancelled"
	NativeExpired   = "expired"
	NativeFailed    = "failed"
)

// NativeStatus is what Poll found.
type NativeStatus struct {
	// State is NativeRunning until the provider batch has ended; then
	// NativeCompleted, NativeCancelled, NativeExpired (its finished
	// requests have results), or NativeFailed (the provider refused it
	// as a whole; it has no results).
	State string
	// Completed and Failed count its finished requests, where the
	// provider tells while it runs.
	Completed, Failed int
	// Message says why it failed.
	Message string
	// Ref, when its ID is set, replaces the stored reference: what the
	// provider told only now (its output files).
	Ref NativeRef
}

// ended reports whether the provider batch has ended.
func (s NativeStatus) ended() bool { return s.State != NativeRunning && s.State != "" }

// NativeResult is one request's result in an ended provider batch.
type NativeResult struct {
	// Key is the key the request was encoded with.
	Key string
	// Status is the status of its answer, and Body the answer in the
	// endpoint's unified shape (a chat.completion, or an error in
	// OpenAI's shape); RequestID the provider's id of it, if any.
	Status    int
	Body      []byte
	RequestID string
	// Code and Message say why a request has no answer (Status 0):
	// batch_cancelled, batch_expired.
	Code, Message string
}

// NativeRefusal is a provider's definite refusal of a submission.
type NativeRefusal struct {
	Status  int
	Message string
}

func (e *NativeRefusal) Error() string {
	return fmt.Sprintf("the provider refused the batch (%d): %s", e.Status, e.Message)
}

// NativeAccounting is what the host does about the cost of native
// parts: lines of a provider batch do not pass through the executor,
// which meters and admits gateway lines.
type NativeAccounting interface {
	// Estimate is the most one request may cost at the provider's batch
	// price, in the host's unit (modelgate's: nano-dollars).
	Estimate(endpoint, provider, model string, body []byte) int64

	// Reserve holds r.Amount against the budgets of the key that created
	// the batch before the part is sent. A refusal is the answer each of
	// the part's requests ends with (a spent budget's 429), and the part
	// is not sent. An error decides nothing: Reserve is asked again. A
	// crash can repeat a Reserve: the host keeps one reservation per
	// r.ID.
	Reserve(ctx context.Context, r Reservation) (refusal *Response, err error)

	// Settle records one request's result (usage and cost at the batch
	// price, metrics) as its result line is stored (just before: a crash
	// in between repeats the Settle rather than skipping it). A crash can
	// repeat a Settle: the host records one per s.LineID.
	Settle(ctx context.Context, s Settlement)

	// Release gives back what is left of r once its part has all its
	// results (or is given up).
	Release(ctx context.Context, r Reservation)
}

// Reservation is what a native part holds against budgets.
type Reservation struct {
	// ID is the part's marker, the same after a crash.
	ID              string
	BatchID, Owner  string
	KeyID, KeyName  string
	Endpoint        string
	Provider, Model string
	Requests        int
	Amount          int64
}

// Settlement is one request of a native part with its result.
type Settlement struct {
	Reservation Reservation
	// LineID is the result line's id (batch_req_…), the same after a
	// crash; CustomID the request's custom_id.
	LineID, CustomID string
	// Status and Body are its answer (Status 0: none).
	Status int
	Body   []byte
}

// nativeState is a native part's progress at its provider, kept in the
// claims with the part. Each step is stored before the next is taken:
// Submitting before the provider is asked to create the batch, Ref right
// after it answered.
type nativeState struct {
	// Marker tags the provider batch.
	Marker string `json:"marker"`
	// Submitting is when the submission was begun (Unix milliseconds):
	// a provider batch may exist from then on, even without a Ref.
	Submitting int64 `json:"submitting,omitempty"`
	// By is the runner that began it.
	By string `json:"by,omitempty"`
	// Ref is the provider batch, once known.
	Ref *NativeRef `json:"ref,omitempty"`
	// CancelSent: the provider was asked to cancel it.
	CancelSent bool `json:"cancel_sent,omitempty"`
	// Closed: nothing more comes from the provider for this part (its
	// results are in, it was never sent, or it was given up).
	Closed bool `json:"closed,omitempty"`
	// Reserved: the accounting holds a reservation for the part.
	Reserved bool `json:"reserved,omitempty"`
}

// windingDown reports whether part p still has a provider batch to
// cancel or collect before its batch can end.
func (p *partState) windingDown() bool {
	n := p.Native
	return n != nil && !p.Done && !n.Closed && n.Submitting != 0
}

// nativeMarker is the marker of part i of batch id: stable, so that a
// runner that takes the part over after a crash looks for the same one.
func nativeMarker(batchID string, part int) string {
	sum := sha256.Sum256([]byte(batchID + "/" + itoa(part)))
	return "mg-" + hex.EncodeToString(sum[:12])
}

// errNativeCrash stops a native part where a test simulates a crash:
// nothing more is stored, and its claim is not released.
var errNativeCrash = errors.New("simulated crash")

// nativeHook, in tests, is called at each step of a native part and may
// return errNativeCrash to stop the part there.
var nativeHook = func(step string) error { return nil }
