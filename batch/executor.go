package batch

import (
	"context"
	"time"
)

// Executor runs the requests of batches. modelgate implements it with the
// path live requests take: routing, translation, fallback between targets,
// and each provider's reverse_proxy.
type Executor interface {
	// Check tells whether body can run at endpoint. On success it returns
	// the model the body names and the provider its first target is on,
	// which the per-provider concurrency limit counts under; otherwise an
	// error whose text tells the user why. models, when not empty, are
	// the only models the batch's creator may use (as the key that created
	// it allows).
	Check(endpoint string, body []byte, models []string) (Route, error)

	// Do runs one request and returns the answer the client would have
	// had. A Response with Status 0 means there is no answer: ctx ended,
	// or KeyGone is set.
	Do(ctx context.Context, req Request) Response
}

// Route is where a request goes.
type Route struct {
	Model    string
	Provider string
	// Upstream is the provider's own name of the model (the first
	// target's): what a line of a native part is encoded for. Empty: the
	// line runs in the gateway.
	Upstream string
}

// Request is one line of a batch, as the executor gets it.
type Request struct {
	BatchID  string
	CustomID string
	Owner    string
	// KeyID and KeyName are the key that created the batch
	// (CreateParams); empty for batches created before they were kept.
	KeyID, KeyName string
	Endpoint       string
	Body           []byte
}

// Response is the answer to a Request.
type Response struct {
	Status    int
	RequestID string
	// RetryAfter is what the answer's retry-after (or retry-after-ms)
	// header asks for; 0 when it has none.
	RetryAfter time.Duration
	// Body is the JSON answer: the endpoint's, or an error in OpenAI's
	// shape.
	Body []byte
	// Final is set for a failure that trying again cannot mend (the
	// answer said x-should-retry: false, as a spent budget's 429 does):
	// the runner does not retry it, whatever its status.
	Final bool
	// KeyGone says that the request was not run because the key that
	// created the batch is gone (deleted, or unknown to the executor): a
	// line never runs without its key. The runner then cancels the
	// batch, and its unfinished lines end with code CancelKeyRevoked.
	KeyGone bool
}

// Settings are the engine's knobs, read from the live config on every poll,
// so a reload changes them for running batches too.
type Settings struct {
	// Workers bounds the requests in flight across all batches, per
	// instance. PerProvider bounds them per provider.
	Workers     int
	PerProvider int
	// MaxRequests is the most lines an input file may hold.
	MaxRequests int
	// MaxLineBytes is the longest line accepted.
	MaxLineBytes int
	// MaxRetries is how often a request answered with 429 or 5xx is tried
	// again, after a backoff that honours retry-after.
	MaxRetries int
	// RetryBackoff is the first backoff; it doubles with each retry, up to
	// a minute.
	RetryBackoff time.Duration
	// CheckpointInterval is how often a part's finished results are
	// written to storage: after a crash, at most this much work is done
	// again.
	CheckpointInterval time.Duration
	// PartLines is the most requests in one work part, the unit instances
	// claim.
	PartLines int
	// Lease is how long a claimed part stays claimed without its holder
	// renewing it: the time another instance waits before taking over the
	// parts of one that died.
	Lease time.Duration
	// OutputRetention is how long a batch's output and error files are
	// kept after they are written (a batch may ask for less); 0 keeps
	// them until they are deleted.
	OutputRetention time.Duration
	// NativePoll is the first wait between two polls of a provider batch;
	// it doubles up to NativePollMax.
	NativePoll    time.Duration
	NativePollMax time.Duration
	// NativeCancelWait is how long a cancelled or expired batch waits for
	// its provider batches to confirm the cancel and hand over their
	// finished results, before it ends without them.
	NativeCancelWait time.Duration
	// NativeSubmitTimeout bounds one submission of a part to its
	// provider (uploading its records included). A submission another
	// instance began is taken over only after it: until then it may
	// still reach the provider.
	NativeSubmitTimeout time.Duration
}

// DefaultSettings are the defaults modelgate documents.
func DefaultSettings() Settings {
	return Settings{
		Workers:             32,
		PerProvider:         16,
		MaxRequests:         50000,
		MaxLineBytes:        16 << 20,
		MaxRetries:          5,
		RetryBackoff:        time.Second,
		CheckpointInterval:  time.Second,
		PartLines:           1000,
		Lease:               30 * time.Second,
		NativePoll:          2 * time.Second,
		NativePollMax:       time.Minute,
		NativeCancelWait:    30 * time.Minute,
		NativeSubmitTimeout: 10 * time.Minute,
	}
}

// withDefaults fills zero (or negative) fields from DefaultSettings; a
// negative MaxRetries is 0.
func (s Settings) withDefaults() Settings {
	d := DefaultSettings()
	orDefault(&s.Workers, d.Workers)
	orDefault(&s.PerProvider, d.PerProvider)
	orDefault(&s.MaxRequests, d.MaxRequests)
	orDefault(&s.MaxLineBytes, d.MaxLineBytes)
	s.MaxRetries = max(s.MaxRetries, 0)
	orDefault(&s.RetryBackoff, d.RetryBackoff)
	orDefault(&s.CheckpointInterval, d.CheckpointInterval)
	orDefault(&s.PartLines, d.PartLines)
	orDefault(&s.Lease, d.Lease)
	orDefault(&s.NativePoll, d.NativePoll)
	orDefault(&s.NativePollMax, d.NativePollMax)
	orDefault(&s.NativeCancelWait, d.NativeCancelWait)
	orDefault(&s.NativeSubmitTimeout, d.NativeSubmitTimeout)
	return s
}

// orDefault sets *v to d when *v is not positive.
func orDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
