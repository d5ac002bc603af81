package caddygateway

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/gateway"
)

// runners keeps one batch runner per storage alive across config reloads.
var runners = caddy.NewUsagePool()

// BatchConfig tunes the batch engine. Zero values take the defaults.
type BatchConfig struct {
	// Workers bounds the batch requests in flight on this instance,
	// across all batches. Default: 32.
	Workers int `json:"workers,omitempty"`

	// PerProvider bounds the batch requests in flight on this instance to
	// any one provider. Default: 16.
	PerProvider int `json:"per_provider,omitempty"`

	// MaxRequests is the most requests one batch may hold. Default: 50000.
	MaxRequests int `json:"max_requests,omitempty"`

	// MaxFileSize is the largest file accepted by POST /v1/files, in
	// bytes. Default: 200 MiB.
	MaxFileSize int64 `json:"max_file_size,omitempty"`

	// CompletionWindow is how long a batch may run before it expires;
	// a batch that asks for a shorter completion_window gets that.
	// Default: 24h.
	CompletionWindow caddy.Duration `json:"completion_window,omitempty"`

	// MaxRetries is how often a request answered with 429 or 5xx is tried
	// again, with a backoff that honours retry-after. Default: 5.
	MaxRetries *int `json:"max_retries,omitempty"`

	// RetryBackoff is the first backoff without retry-after; it doubles
	// per retry, up to a minute. Default: 1s.
	RetryBackoff caddy.Duration `json:"retry_backoff,omitempty"`

	// CheckpointInterval is how often finished results are written to
	// storage; after a crash at most this much work is done again.
	// Default: 1s.
	CheckpointInterval caddy.Duration `json:"checkpoint_interval,omitempty"`

	// PartLines is the most requests in one part, the unit of work
	// instances claim. Default: 1000.
	PartLines int `json:"part_lines,omitempty"`

	// Lease is how long a claimed part stays claimed unless its instance
	// renews it: how long others wait to take over from an instance that
	// died. Default: 30s.
	Lease caddy.Duration `json:"lease,omitempty"`

	// PollInterval is how often the runner looks for work, and so how
	// quickly other instances notice a new or cancelled batch. It is read
	// when the runner starts. Default: 1s.
	PollInterval caddy.Duration `json:"poll_interval,omitempty"`
}

const (
	defaultMaxFileSize      = 200 << 20
	defaultCompletionWindow = 24 * time.Hour
)

// provisionStorage loads the app's storage: the configured one, else
// Caddy's.
func (a *App) provisionStorage(ctx caddy.Context) error {
	a.storage = ctx.Storage()
	if a.StorageRaw != nil {
		mod, err := ctx.LoadModule(a, "StorageRaw")
		if err != nil {
			return fmt.Errorf("loading storage: %w", err)
		}
		if a.storage, err = mod.(caddy.StorageConverter).CertMagicStorage(); err != nil {
			return fmt.Errorf("creating storage: %w", err)
		}
	}
	a.storageID = storageIdentity(a.storage)
	a.storage = withFileLocks(a.storage)
	a.responsesID, a.responseWrites = a.storageID, new(sync.WaitGroup)
	if a.FileStorageRaw != nil {
		mod, err := ctx.LoadModule(a, "FileStorageRaw")
		if err != nil {
			return fmt.Errorf("loading file_storage: %w", err)
		}
		if a.fileStorage, err = mod.(caddy.StorageConverter).CertMagicStorage(); err != nil {
			return fmt.Errorf("creating file_storage: %w", err)
		}
		a.storageID += "+files=" + storageIdentity(a.fileStorage)
	}
	return nil
}

// provisionBatch sets up the batch store and the batch defaults.
func (a *App) provisionBatch() error {
	if a.Batch == nil {
		a.Batch = new(BatchConfig)
	}
	c := a.Batch
	if c.MaxFileSize == 0 {
		c.MaxFileSize = defaultMaxFileSize
	}
	if c.CompletionWindow == 0 {
		c.CompletionWindow = caddy.Duration(defaultCompletionWindow)
	}
	if c.PollInterval == 0 {
		c.PollInterval = caddy.Duration(time.Second)
	}
	if c.Workers < 0 || c.PerProvider < 0 || c.MaxRequests < 0 || c.MaxFileSize < 0 || c.PartLines < 0 ||
		c.CompletionWindow < 0 || c.PollInterval < 0 || c.Lease < 0 || c.CheckpointInterval < 0 ||
		c.RetryBackoff < 0 || c.MaxRetries != nil && *c.MaxRetries < 0 {
		return errors.New("batch: settings must not be negative")
	}

	opts := []batch.Option{batch.WithRetention(a.retention().batch())}
	if a.fileStorage != nil {
		opts = append(opts, batch.WithFileStorage(a.fileStorage))
	}
	a.store = batch.NewStore(a.storage, "modelgate", opts...)
	return nil
}

// storageIdentity names a storage: configs whose storages have the same
// identity share one batch runner.
func storageIdentity(s certmagic.Storage) string {
	if st, ok := s.(fmt.Stringer); ok {
		return fmt.Sprintf("%T:%s", s, st)
	}
	return fmt.Sprintf("%T:%+v", s, s)
}

// settings converts the config into the engine's settings.
func (c *BatchConfig) settings() batch.Settings {
	s := batch.DefaultSettings()
	set := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	setDur := func(dst *time.Duration, v caddy.Duration) {
		if v > 0 {
			*dst = time.Duration(v)
		}
	}
	set(&s.Workers, c.Workers)
	set(&s.PerProvider, c.PerProvider)
	set(&s.MaxRequests, c.MaxRequests)
	set(&s.PartLines, c.PartLines)
	setDur(&s.RetryBackoff, c.RetryBackoff)
	setDur(&s.CheckpointInterval, c.CheckpointInterval)
	setDur(&s.Lease, c.Lease)
	if c.MaxRetries != nil {
		s.MaxRetries = *c.MaxRetries
	}
	s.MaxLineBytes = defaultMaxRequestBody
	return s
}

// liveBatch is what the batch runner reads on every poll: the settings and
// providers of the config running now (which changes only after a new
// config fully started), so a reload reaches running batches without
// restarting them.
func liveBatch() (batch.Live, bool) {
	v, err := caddy.ActiveContext().AppIfConfigured("modelgate")
	if err != nil {
		return batch.Live{}, false
	}
	a, ok := v.(*App)
	if !ok || a.store == nil {
		return batch.Live{}, false
	}
	log := a.logger.Named("batch")
	set := a.Batch.settings()
	set.OutputRetention = time.Duration(a.retention().BatchOutput)
	return batch.Live{Settings: set, Executor: a.BatchExecutor(), Logger: log,
		Finished:   func(owner string, b batch.Batch) { a.batchEvent("batch_"+b.Status, owner, b) },
		KeyGone:    a.gw.BatchKeyGone,
		Cancelled:  func(id string) { a.publish(channelBatches, id) },
		Stored:     a.countStored,
		Native:     a.nativeAPI,
		Accounting: a.gw.NativeAccounting(),
	}, true
}

// batchEvent emits name through Caddy's events app with what a subscriber
// needs to know of b: batch_submitted when a batch is created here, and
// batch_completed, batch_failed, batch_cancelled or batch_expired when
// this instance brought it to that status.
func (a *App) batchEvent(name, owner string, b batch.Batch) {
	data := map[string]any{
		"batch_id":      b.ID,
		"owner":         gateway.OwnerName(owner),
		"endpoint":      b.Endpoint,
		"status":        b.Status,
		"input_file_id": b.InputFileID,
		"total":         b.RequestCounts.Total,
		"completed":     b.RequestCounts.Completed,
		"failed":        b.RequestCounts.Failed,
	}
	if b.OutputFileID != nil {
		data["output_file_id"] = *b.OutputFileID
	}
	if b.ErrorFileID != nil {
		data["error_file_id"] = *b.ErrorFileID
	}
	if b.Errors != nil {
		data["errors"] = len(b.Errors.Data)
	}
	a.events.Emit(a.ctx, name, data)
}

// BatchExecutor returns the executor batch lines run through: the
// gateway's (gateway.Gateway.BatchExecutor), one per config, by which the
// runner tells configs apart. Tools and benchmarks may run requests
// through it as the batch runner does.
func (a *App) BatchExecutor() batch.Executor { return a.batchExec }
