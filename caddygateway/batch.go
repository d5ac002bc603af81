package caddygateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/providers"
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
			return fmt.Errorf("loading storage: %v", err)
		}
		if a.storage, err = mod.(caddy.StorageConverter).CertMagicStorage(); err != nil {
			return fmt.Errorf("creating storage: %v", err)
		}
	}
	a.storageID = storageIdentity(a.storage)
	a.storage = withFileLocks(a.storage)
	a.responsesID, a.responseWrites = a.storageID, new(sync.WaitGroup)
	if a.FileStorageRaw != nil {
		mod, err := ctx.LoadModule(a, "FileStorageRaw")
		if err != nil {
			return fmt.Errorf("loading file_storage: %v", err)
		}
		if a.fileStorage, err = mod.(caddy.StorageConverter).CertMagicStorage(); err != nil {
			return fmt.Errorf("creating file_storage: %v", err)
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
		Finished:  func(owner string, b batch.Batch) { a.batchEvent("batch_"+b.Status, owner, b) },
		KeyGone:   a.batchKeyGone,
		Cancelled: func(id string) { a.publish(channelBatches, id) },
		Stored:    a.countStored,
	}, true
}

// batchEvent emits name through Caddy's events app with what a subscriber
// needs to know of b: batch_submitted when a batch is created here, and
// batch_completed, batch_failed, batch_cancelled or batch_expired when
// this instance brought it to that status.
func (a *App) batchEvent(name, owner string, b batch.Batch) {
	data := map[string]any{
		"batch_id":      b.ID,
		"owner":         ownerName(owner),
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
// dispatcher live requests use, called in-process. Tools and benchmarks may
// run requests through it as the batch runner does.
func (a *App) BatchExecutor() batch.Executor {
	if a.batchExec == nil {
		a.batchExec = &batchExecutor{dispatch: a.dispatch, log: a.logger.Named("batch"), scan: a.scanExposure, lineKey: a.batchLineKey, blocked: a.accountBlocked}
	}
	return a.batchExec
}

// batchExecutor runs batch requests through the dispatcher live requests
// use: validation, routing, translation, fallback, and each provider's
// reverse_proxy, called in-process.
type batchExecutor struct {
	dispatch *dispatcher
	log      *zap.Logger
	scan     func(where, query string, body []byte, by string)
	// lineKey is the key a line runs under: the batch's creator, as it
	// is now. errKeyGone when there is none: the line must not run.
	lineKey func(ctx context.Context, req batch.Request) (*Key, error)
	// blocked reports whether a key's account is suspended or deleted:
	// its lines are refused (nil: none is).
	blocked func(*Key) bool
}

// errKeyGone says that the key that created a batch is gone: a managed
// key deleted (through the admin API, the command, the key settings page
// or auto_revoke), a static key no longer in the config, or none recorded.
// None of the batch's lines may run any more.
var errKeyGone = errors.New("the API key that created the batch is gone")

// batchLineKey is the key a batch line runs under and counts against: the
// key that created the batch, with its limits and budget as they are now.
// A key that is gone is errKeyGone, never a key with the default policy: a
// revoked key's batch must not spend on. Another error means the keys
// could not be read just now.
//
// A managed key missing from this instance's index may have been created
// on another instance and not have arrived here yet: the storage, which
// every instance shares, decides. (One deleted elsewhere may still be in
// the index until the deletion arrives: the runner that saw it gone has
// cancelled the batch in the storage by then, and every runner stops its
// parts at its next step, or at once on a shared state.)
func (a *App) batchLineKey(ctx context.Context, req batch.Request) (*Key, error) {
	switch {
	case req.KeyID != "":
		mk, ok := a.managed.LookupID(req.KeyID)
		if !ok {
			var err error
			if mk, err = a.managed.Get(ctx, req.KeyID); errors.Is(err, keys.ErrNotFound) {
				return nil, errKeyGone
			} else if err != nil {
				return nil, fmt.Errorf("reading key %s: %w", req.KeyID, err)
			}
		}
		if mk.Owner != req.Owner {
			return nil, errKeyGone // not the owner's key: no record of this owner names it
		}
		return &Key{Name: mk.Name, Owner: mk.Owner, ID: mk.ID, Models: mk.Models, Limits: mk.Limits, Budget: mk.Budget}, nil
	case req.KeyName != "":
		// A batch of a static key is kept under its storage owner; one
		// created before static keys' owners were kept apart, under its
		// name (no managed key's batch records no key id).
		if k := a.staticByName[req.KeyName]; k != nil && (k.storageOwner() == req.Owner || k.Owner == req.Owner) {
			return k, nil
		}
	}
	// A static key removed from the config, or a batch from before the
	// creating key was kept: nothing to run it under.
	return nil, errKeyGone
}

// batchKeyGone is the runner's Live.KeyGone: whether the key that created
// a batch is gone, as batchLineKey decides.
func (a *App) batchKeyGone(ctx context.Context, owner, keyID, keyName string) (bool, error) {
	_, err := a.batchLineKey(ctx, batch.Request{Owner: owner, KeyID: keyID, KeyName: keyName})
	if errors.Is(err, errKeyGone) {
		return true, nil
	}
	return false, err
}

// batchEndpoints are the endpoints batches run, by path.
var batchEndpoints = map[string]endpoint{
	batch.EndpointChat:       endpointChat,
	batch.EndpointRerank:     endpointRerank,
	batch.EndpointEmbeddings: endpointEmbeddings,
}

// Check validates a batch request's body as the live endpoint would and
// checks that its model routes to a provider that serves the endpoint.
func (e batchExecutor) Check(endpoint string, body []byte, models []string) (batch.Route, error) {
	var model string
	switch endpoint {
	case batch.EndpointChat:
		info, err := providers.ValidateChat(body)
		if err != nil {
			return batch.Route{}, err
		}
		model = info.Model
	case batch.EndpointRerank:
		req, err := providers.ValidateRerank(body)
		if err != nil {
			return batch.Route{}, err
		}
		model = req.Model
	case batch.EndpointEmbeddings:
		req, err := providers.ValidateEmbeddings(body)
		if err != nil {
			return batch.Route{}, err
		}
		model = req.Model
	default:
		return batch.Route{}, fmt.Errorf("endpoint %s cannot run in batches", endpoint)
	}
	if !(&Key{Models: models}).allows(model) {
		return batch.Route{}, fmt.Errorf("the API key that created the batch may not use the model %q", model)
	}
	prov, err := e.dispatch.route(batchEndpoints[endpoint], model)
	if err != nil {
		return batch.Route{}, err
	}
	return batch.Route{Model: model, Provider: prov}, nil
}

// Do runs one batch request. The request gets what Caddy's HTTP server
// would have given it (replacer, variables, server), so reverse_proxy works
// as for a client's request; a broken upstream body makes reverse_proxy
// panic with http.ErrAbortHandler, which is caught here, as any other panic
// is, since nothing above a batch goroutine would catch it.
func (e batchExecutor) Do(ctx context.Context, req batch.Request) (resp batch.Response) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://modelgate.batch"+req.Endpoint, bytes.NewReader(req.Body))
	if err != nil {
		return batchError(http.StatusInternalServerError, "server_error", "the request could not be built")
	}
	r.RemoteAddr = "127.0.0.1:0"
	r.Header.Set("Content-Type", "application/json")
	rec := &bufferWriter{header: make(http.Header)}
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), rec, &caddyhttp.Server{})

	log := e.log.With(zap.String("batch_id", req.BatchID), zap.String("custom_id", req.CustomID))
	// The line is its creator's: it runs under that key as it is now, or
	// not at all. Its usage is accounted to that key and owner, and it
	// counts against their budgets (not their rate limits: the batch
	// engine paces itself). Its models were checked when the batch was
	// created.
	key, err := e.lineKey(ctx, req)
	switch {
	case errors.Is(err, errKeyGone):
		return batch.Response{KeyGone: true}
	case err != nil:
		if ctx.Err() != nil {
			return batch.Response{} // stopped: no answer
		}
		log.Warn("the key that created the batch could not be read; the line is tried again", zap.Error(err))
		return batchError(http.StatusServiceUnavailable, "server_error", "the API key that created the batch could not be checked just now")
	}
	if e.blocked != nil && e.blocked(key) {
		metrics.suspended.Inc()
		return batch.Response{Status: http.StatusForbidden, Body: accountSuspended().JSON()}
	}
	r = r.WithContext(context.WithValue(r.Context(), batchLineKey{}, true))
	e.scan("batch "+req.BatchID+" line "+req.CustomID, "", req.Body, sender(key))
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler {
			resp = batchError(http.StatusBadGateway, "server_error", "the provider broke off its answer")
			return
		}
		log.Error("batch request panicked", zap.String("panic", fmt.Sprint(v)))
		resp = batchError(http.StatusInternalServerError, "server_error", "the gateway failed on this request")
	}()
	switch req.Endpoint {
	case batch.EndpointChat:
		e.dispatch.chat(rec, r, req.Body, key, log)
	case batch.EndpointEmbeddings:
		e.dispatch.embeddings(rec, r, req.Body, key, log)
	default:
		e.dispatch.rerank(rec, r, req.Body, key, log)
	}
	if ctx.Err() != nil {
		return batch.Response{} // stopped: no answer
	}
	return batch.Response{
		Status:     rec.status,
		RequestID:  rec.header.Get("X-Request-Id"),
		RetryAfter: retryAfter(rec.header, time.Now()),
		Body:       rec.buf.Bytes(),
		Final:      rec.header.Get("X-Should-Retry") == "false",
	}
}

func batchError(status int, typ, msg string) batch.Response {
	e := &providers.Error{Status: status, Type: typ, Message: msg}
	return batch.Response{Status: status, Body: e.JSON()}
}

// retryAfter reads retry-after-ms, then retry-after (seconds or an HTTP
// date).
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// bufferWriter is the ResponseWriter of a batch request: it keeps the
// status, headers and body. Batch requests never stream.
type bufferWriter struct {
	header http.Header
	status int
	buf    bytes.Buffer
}

func (w *bufferWriter) Header() http.Header { return w.header }

func (w *bufferWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
}

func (w *bufferWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.buf.Write(p)
}
