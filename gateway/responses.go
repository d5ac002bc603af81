package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/responses"
)

// This file serves OpenAI's Responses API
// (docs/design/hub-and-pass-through.md), for Codex CLI and the OpenAI
// Agents SDK:
//
//	POST   /v1/responses                     a response, streamed or not
//	GET    /v1/responses/{id}                a stored response
//	DELETE /v1/responses/{id}                forget it
//	GET    /v1/responses/{id}/input_items    its conversation's input items
//
// A model on a provider that speaks the Responses API itself (OpenAI,
// Azure OpenAI) gets the request passed through untouched but for the
// model, and the answer back as sent; the provider stores it (store is its
// default) and the gateway keeps a pointer, so that GET, DELETE and
// input_items reach that provider. Any other chat provider gets the
// request translated through the chat hub; the gateway stores what it
// answered, per owner, in the storage, and continues it on
// previous_response_id.

var endpointResponses = &endpoint{label: "responses", serves: func(p *Provider) bool { return p.Responses != nil || p.Chat != nil },
	api: responsesAPI}

// responsesAPI ends a passed-through stream the gateway cannot finish with
// the Responses API's error event; its errors are OpenAI's.
var responsesAPI = &api{errorBody: openAIAPI.errorBody, streamError: responses.AppendErrorEvent}

// ResponseStore keeps stored responses in a storage:
// modelgate/o/<owner hash>/responses/<id>.json, a record of the translated
// conversation (providers/responses' record), or a pointer to the provider
// that stores a passed-through one: {"provider": "<name>"}.
//
// With a local state (one instance), records are written off the request
// path (saveLater): a storage on disk syncs each write, milliseconds that
// every Responses request would otherwise wait, and that no client needs
// until it names the response in a later request. Until a record is in the
// storage, this process's requests find it among the pending writes. With
// a shared state (a cluster on Redis) the request writes its own record,
// so that the next request finds it on any instance; a Redis write takes
// tens of microseconds.
//
// A stored response expires TTL after it was created: it is then gone for
// its owner (404), and the retention sweep deletes it.
// What is stored counts against its owner's storage quota: stored is told
// of each write and deletion, and room refuses a response the gateway
// would store for an owner at its quota.
type ResponseStore struct {
	Storage storage.Storage // nil: nothing is stored
	ID      string          // the storage's identity: pending writes are per storage and key
	Writes  *sync.WaitGroup // the host's writes in flight, which it waits for at cleanup; may be nil
	Now     bool            // write on the request path (a shared state)

	TTL   time.Duration    // 0: kept until deleted
	Clock func() time.Time // nil: time.Now

	quota *StorageQuota // counts what is stored against the owner's storage quota (set by New)
	// guard is what a record goes through before it is stored: the
	// answer guards of the call (nil: none); a nil record is not stored.
	guard func(rec []byte) []byte
}

// expired reports whether the stored record rec (a translated response's
// record, or a pointer) has expired: ttl after its creation. A pointer
// from before pointers recorded it never expires here; the retention
// sweep dates it by when it was written.
func (rs ResponseStore) expired(rec []byte) bool {
	if rs.TTL <= 0 {
		return false
	}
	f := gjson.GetManyBytes(rec, "response.created_at", "created_at")
	created := f[0].Int()
	if created == 0 {
		created = f[1].Int()
	}
	if created <= 0 {
		return false
	}
	return !rs.time().Before(time.Unix(created, 0).Add(rs.TTL))
}

// counted tells the storage quota that owner stores delta bytes more (or
// fewer).
func (rs ResponseStore) counted(ctx context.Context, owner string, delta int64) {
	if rs.quota != nil {
		rs.quota.Count(ctx, owner, delta)
	}
}

// room refuses a response the gateway would store for owner when owner
// is at its storage quota.
func (rs ResponseStore) room(ctx context.Context, owner string) *providers.Error {
	if rs.quota == nil {
		return nil
	}
	_, perr := rs.quota.Room(ctx, owner, "store")
	return perr
}

// time is the store's clock's time.
func (rs ResponseStore) time() time.Time {
	if rs.Clock != nil {
		return rs.Clock()
	}
	return time.Now()
}

func (rs ResponseStore) key(owner, id string) string {
	return path.Join(storage.OwnerDir("modelgate", owner), "responses", id+".json")
}

func (rs ResponseStore) load(ctx context.Context, owner, id string) ([]byte, error) {
	key := rs.key(owner, id)
	if w := pendingWrites.get(rs.ID, key); w != nil {
		return w.record, nil
	}
	return rs.Storage.Load(ctx, key)
}

// saveLater stores record as owner's response id without waiting for the
// storage; a failure is logged. When too many writes are already waiting
// (the storage is not keeping up), or when the state is shared, it waits
// for its own.
func (rs ResponseStore) saveLater(ctx context.Context, owner, id string, record []byte, log *zap.Logger) {
	key := rs.key(owner, id)
	w := &pendingWrite{s: rs.Storage, storageID: rs.ID, key: key, id: id, record: record, stored: make(chan struct{}),
		ctx: context.WithoutCancel(ctx), wg: rs.Writes, log: log}
	if rs.quota != nil {
		w.written = func(ctx context.Context) { rs.counted(ctx, owner, int64(len(record))) }
	}
	if rs.Now || !pendingWrites.add(w) {
		w.write()
	}
}

// delete forgets owner's response id, once a write of it still pending has
// landed (else that write would bring it back).
func (rs ResponseStore) delete(ctx context.Context, owner, id string) error {
	key := rs.key(owner, id)
	if p := pendingWrites.get(rs.ID, key); p != nil {
		select {
		case <-p.stored:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return rs.Storage.Delete(ctx, key)
}

// maxPendingWrites bounds the records waiting for the storage, in memory,
// and with them how long a record can take to reach the storage (where
// the other instances of a cluster read it): a few hundred writes, a
// fraction of a second even on a slow disk. storageWriters is how many
// are written at once (each write to a storage on disk holds a thread
// while it syncs).
const (
	maxPendingWrites = 256
	storageWriters   = 8
)

// pendingWrites are the records on their way to a storage, by the
// storage's identity and key: one table for the process, so that the
// config a reload brings finds what the previous one was writing.
var pendingWrites = &pendingTable{m: make(map[string]*pendingWrite), queue: make(chan *pendingWrite, maxPendingWrites)}

type pendingTable struct {
	mu    sync.Mutex
	m     map[string]*pendingWrite
	queue chan *pendingWrite
	start sync.Once
}

// pendingWrite is one record on its way to a storage.
type pendingWrite struct {
	s         storage.Storage
	storageID string
	key       string
	id        string // the response's, for the log
	record    []byte
	stored    chan struct{} // closed once the storage has answered
	ctx       context.Context
	wg        *sync.WaitGroup // the host's writes, or nil
	log       *zap.Logger
	queued    bool                      // for the writers (else written by the request itself)
	written   func(ctx context.Context) // told once the record is stored, or nil
}

// add queues w for the writers, or reports false when the queue is full.
func (t *pendingTable) add(w *pendingWrite) bool {
	t.start.Do(func() {
		for range storageWriters {
			go func() {
				for w := range t.queue {
					w.write()
				}
			}()
		}
	})
	w.queued = true
	if w.wg != nil {
		w.wg.Add(1)
	}
	k := w.storageID + "\x00" + w.key
	t.mu.Lock()
	prev := t.m[k]
	t.m[k] = w // a later write of the key is the one read
	select {
	case t.queue <- w:
		t.mu.Unlock()
		return true
	default:
		if prev != nil {
			t.m[k] = prev
		} else {
			delete(t.m, k)
		}
		t.mu.Unlock()
		w.queued = false
		if w.wg != nil {
			w.wg.Done()
		}
		return false
	}
}

func (t *pendingTable) get(storageID, key string) *pendingWrite {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[storageID+"\x00"+key]
}

// write stores the record and ends the write; the table keeps a later
// write of the same key.
func (w *pendingWrite) write() {
	err := w.s.Store(w.ctx, w.key, w.record)
	k := w.storageID + "\x00" + w.key
	t := pendingWrites
	t.mu.Lock()
	if t.m[k] == w {
		delete(t.m, k)
	}
	t.mu.Unlock()
	close(w.stored)
	if err != nil {
		w.log.Error("storing a response", zap.String("response_id", w.id), zap.Error(err))
	} else if w.written != nil {
		w.written(w.ctx)
	}
	if w.queued && w.wg != nil {
		w.wg.Done()
	}
}

// pointer is the record of a response a provider stores itself, and
// when the gateway learnt of it (for its expiry).
type pointer struct {
	Provider  string `json:"provider"`
	CreatedAt int64  `json:"created_at,omitempty"`
}

// ValidResponseID reports whether id is a response id the gateway may use
// in a storage key.
func ValidResponseID(id string) bool {
	if !strings.HasPrefix(id, "resp_") || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// serveResponses serves POST /v1/responses for the call's key's owner (no
// key: nothing is stored or continued).
func (g *Gateway) serveResponses(ctx context.Context, c *Call, o *Outcome) {
	body, key, log, store := c.Body, c.Key, c.Log, g.responses
	// Only what routing needs is read here: a provider that speaks the
	// Responses API gets the request as it is (built-in tools, background,
	// whatever it takes); the rest is checked when it is translated.
	info, err := responses.Head(body)
	if err != nil {
		o.fail(responsesAPI, asProviderError(err))
		return
	}
	owner := ""
	if key != nil && store.Storage != nil {
		owner = key.StorageOwner()
	}

	// A previous response the gateway stored continues here: its
	// conversation is the history of this one, whichever provider answers.
	// One a provider stores itself (passed through earlier) continues
	// only on that provider.
	var history []byte
	storedBy := ""
	if id := info.PreviousResponseID; id != "" {
		rec, err := loadRecord(ctx, store, owner, id)
		switch {
		case errors.Is(err, errPointer):
			storedBy = gjson.GetBytes(rec, "provider").Str
		case err != nil && StorageUnreachable(err):
			// Not a 404: the response is there, and the client would
			// start the conversation over.
			log.Error("reading the previous response", zap.String("response_id", id), zap.Error(err))
			o.storageUnreachable(responsesAPI, "reading the previous response")
			return
		case err != nil:
			o.fail(responsesAPI, responses.NotFound(id))
			return
		default:
			if history, err = responses.History(rec); err != nil {
				o.fail(responsesAPI, asProviderError(err))
				return
			}
		}
	}

	var parsed *responses.Request
	parse := func() (*responses.Request, error) {
		if parsed != nil {
			return parsed, nil
		}
		var err error
		parsed, err = responses.Parse(body)
		return parsed, err
	}
	var rq *request
	rq = &request{endpoint: endpointResponses, model: info.Model, body: body, history: history, stream: info.Stream,
		guarded: func(masked []byte) error { body, parsed = masked, nil; return nil },
		prepare: func(p *Provider, model string) (providers.Request, exchange, error) {
			if storedBy != "" && (p.Name != storedBy || p.Responses == nil) {
				e := responses.NotFound(info.PreviousResponseID)
				e.Message += " Provider " + storedBy + " stores it: continue it with a model that provider serves."
				return providers.Request{}, exchange{}, e
			}
			if p.Responses != nil && history == nil {
				return passResponses(ctx, p, body, model, c.Header, info, owner, store, log)
			}
			if p.Chat == nil {
				return providers.Request{}, exchange{}, responses.NotFound(info.PreviousResponseID)
			}
			req, err := parse()
			if err != nil {
				return providers.Request{}, exchange{}, err
			}
			return translateResponses(ctx, o.Header, p, req, history, model, info, owner, store.guarded(g.recordGuard(ctx, rq.guards)), g.builtinTools, log)
		}}
	g.serve(ctx, c, o, rq)
}

// passResponses sends a Responses request to a provider that speaks the
// API itself, and keeps a pointer to the response it stores.
func passResponses(ctx context.Context, p *Provider, body []byte, model string, h http.Header, info responses.Info,
	owner string, store ResponseStore, log *zap.Logger) (providers.Request, exchange, error) {
	preq, err := p.Responses.NativeRequest("/responses", body, model, h)
	ex := exchange{stream: info.Stream, mapError: nativeError(p), translate: func(answer []byte) ([]byte, Usage, error) {
		if info.Store && owner != "" {
			savePointer(ctx, store, owner, gjson.GetBytes(answer, "id").Str, p.Name, log)
		}
		return answer, responses.AnswerUsage(answer), nil
	}}
	if info.Stream {
		var onID func(string)
		if info.Store && owner != "" {
			onID = func(id string) { savePointer(ctx, store, owner, id, p.Name, log) }
		}
		ex.tr = responses.NewRelay(onID)
	}
	return preq, ex, err
}

// translateResponses sends a Responses request through the chat hub to
// p, and stores what it answered for owner.
// The built-in tools the provider cannot run are dropped or refused as
// builtinTools says; those dropped are named in the client's header h.
func translateResponses(ctx context.Context, h http.Header, p *Provider, req *responses.Request, history []byte, model string, info responses.Info,
	owner string, store ResponseStore, builtinTools string, log *zap.Logger) (providers.Request, exchange, error) {
	if info.Store && owner != "" {
		// The gateway stores what it translates: not for an owner at its
		// storage quota.
		if perr := store.room(ctx, owner); perr != nil {
			perr.Message += " Or send store: false."
			return providers.Request{}, exchange{}, perr
		}
	}
	x, err := responses.Translator{BuiltinTools: builtinTools}.New(req, history)
	if err != nil {
		return providers.Request{}, exchange{}, err
	}
	preq, err := x.ChatRequest(p.Chat, model)
	if dropped := x.Dropped(); len(dropped) > 0 {
		h.Set(responses.DroppedToolsHeader, strings.Join(dropped, ", "))
	} else {
		h.Del(responses.DroppedToolsHeader) // an earlier target's
	}
	saveRecord := func() {
		rec := x.Record()
		if rec != nil && store.guard != nil {
			rec = store.guard(rec)
		}
		if rec != nil && owner != "" {
			store.saveLater(ctx, owner, x.ID(), rec, log)
		}
	}
	ex := exchange{stream: info.Stream, mapError: p.chatErrorMapper(),
		translate: func(answer []byte) ([]byte, Usage, error) {
			hub, _, err := p.Chat.ChatResponse(answer)
			if err != nil {
				return nil, Usage{}, err
			}
			out, err := x.Response(withModel(hub, model))
			if err == nil {
				saveRecord()
			}
			return out, x.Used(), err
		}}
	if info.Stream {
		ex.tr = &hubChain{inner: p.Chat.ChatStream(providers.StreamOptions{IncludeUsage: true, Model: model}),
			outer: x.Stream(), done: saveRecord}
	}
	return preq, ex, err
}

// errPointer reports a stored response that a provider keeps itself.
var errPointer = errors.New("the response is stored by its provider")

// loadRecord loads owner's stored response id: its record, or errPointer
// for a passed-through one (whose provider the pointer names).
func loadRecord(ctx context.Context, store ResponseStore, owner, id string) ([]byte, error) {
	if owner == "" || store.Storage == nil || !ValidResponseID(id) {
		return nil, errStoredNotExist
	}
	rec, err := store.load(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if store.expired(rec) {
		return nil, errStoredNotExist // for the sweep to delete
	}
	if gjson.GetBytes(rec, "provider").Exists() {
		return rec, errPointer
	}
	return rec, nil
}

var errStoredNotExist = errors.New("no such response")

// savePointer records that provider stores the passed-through response id.
func savePointer(ctx context.Context, store ResponseStore, owner, id, provider string, log *zap.Logger) {
	if !ValidResponseID(id) {
		return
	}
	b, _ := json.Marshal(pointer{Provider: provider, CreatedAt: store.time().Unix()})
	store.saveLater(ctx, owner, id, b, log)
}

// hubChain is a translated Responses stream: the provider's chat stream
// translator (nil: the provider already streams hub chunks) feeding the
// Responses translator; done runs once the stream has ended, to store
// what it answered.
type hubChain struct {
	inner   providers.StreamTranslator
	outer   *responses.Stream
	done    func()
	scratch []byte
}

func (c *hubChain) Event(dst, ev []byte) ([]byte, error) {
	hub := c.scratch[:0]
	if c.inner == nil {
		hub = append(append(hub, ev...), "\n\n"...)
	} else {
		var err error
		if hub, err = c.inner.Event(hub, ev); err != nil {
			c.scratch = hub
			return c.outer.Fail(dst, asProviderError(err)), nil
		}
	}
	c.scratch = hub
	return c.outer.Events(dst, hub), nil
}

// Ended implements providers.StreamEnder: the Responses stream has ended.
func (c *hubChain) Ended() bool { return c.outer.Ended() }

// Usage implements providers.StreamTranslator: the usage the Responses
// stream carries.
func (c *hubChain) Usage() providers.Used { return c.outer.Usage() }

var _ providers.StreamEnder = (*hubChain)(nil)

func (c *hubChain) Close(dst []byte) []byte {
	if c.inner != nil {
		dst = c.outer.Events(dst, c.inner.Close(c.scratch[:0]))
	}
	dst = c.outer.Close(dst)
	c.done()
	return dst
}

// A StoredRequest is a request to a stored response: GET or DELETE
// /v1/responses/{id}, GET /v1/responses/{id}/input_items.
type StoredRequest struct {
	Method string
	Owner  string // the storage owner of the request's key (Key.StorageOwner)
	ID     string // the response's id
	Items  bool   // input_items
	Query  url.Values
	Header http.Header // the client's, for a provider that stores the response
}

// StoredResponse answers a request to a stored response of its owner: from
// the record the gateway keeps, or from the provider that stores a
// passed-through one.
func (g *Gateway) StoredResponse(ctx context.Context, r StoredRequest, o *Outcome) {
	if o.Header == nil {
		o.Header = make(http.Header)
	}
	store := g.responses
	rec, err := loadRecord(ctx, store, r.Owner, r.ID)
	switch {
	case errors.Is(err, errPointer):
		var ptr pointer
		_ = json.Unmarshal(rec, &ptr)
		g.proxyStoredResponse(ctx, r, o, ptr.Provider, int64(len(rec)))
		return
	case err != nil && storage.IsNotExist(err) || errors.Is(err, errStoredNotExist):
		o.fail(openAIAPI, responses.NotFound(r.ID))
		return
	case err != nil:
		g.internalError(o, "reading response "+r.ID, err)
		return
	}
	switch {
	case r.Method == http.MethodDelete:
		if err := store.delete(ctx, r.Owner, r.ID); err != nil {
			g.internalError(o, "deleting response "+r.ID, err)
			return
		}
		store.counted(ctx, r.Owner, -int64(len(rec)))
		o.answer(responses.Deleted(r.ID))
	case r.Items:
		p, err := responses.ParseListParams(r.Query)
		if err == nil {
			var out []byte
			if out, err = responses.InputItems(rec, p); err == nil {
				o.answer(out)
				return
			}
		}
		o.fail(openAIAPI, asProviderError(err))
	default:
		out, err := responses.StoredResponse(rec, r.Query["include[]"])
		if err != nil {
			o.fail(openAIAPI, asProviderError(err))
			return
		}
		o.answer(out)
	}
}

// proxyStoredResponse sends GET or DELETE of a passed-through response to
// the provider that stores it; a DELETE forgets the pointer too.
func (g *Gateway) proxyStoredResponse(ctx context.Context, r StoredRequest, o *Outcome, name string, size int64) {
	p := g.providers[name]
	if p == nil || p.Responses == nil {
		o.fail(openAIAPI, responses.NotFound(r.ID))
		return
	}
	rest := r.ID
	if r.Items {
		rest += "/input_items"
	}
	preq, err := p.Responses.NativeRequest("/responses/"+rest, nil, "", r.Header)
	if err != nil {
		o.fail(openAIAPI, asProviderError(err))
		return
	}
	preq.Method, preq.Body = r.Method, nil
	if r.Method == http.MethodGet {
		// The client's query stays here: the provider gets only what the
		// gateway knows of it, written anew (a provider's own parameters,
		// such as Azure's api-version, are in preq.Query already).
		q, err := responses.StoredQuery(r.Query, r.Items)
		if err != nil {
			o.fail(openAIAPI, asProviderError(err))
			return
		}
		if q != "" {
			if preq.Query != "" {
				preq.Query += "&"
			}
			preq.Query += q
		}
	}
	at := attempt{api: openAIAPI, o: o, obs: g.obs}
	status, f := at.forward(ctx, p, preq, &exchange{translate: passThrough, mapError: nativeError(p)})
	if f != nil {
		o.failWith(openAIAPI, f)
		return
	}
	if r.Method == http.MethodDelete && status == http.StatusOK {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		store := g.responses
		if err := store.delete(ctx, r.Owner, r.ID); err != nil {
			g.log.Error("forgetting a response pointer", zap.String("response_id", r.ID), zap.Error(err))
			return
		}
		store.counted(ctx, r.Owner, -size)
	}
}

// internalError logs err and answers 500 without its text, which may name
// storage paths; or 503 with retry-after when the storage cannot be
// reached (Redis down): clients try again, and it is back in a moment.
func (g *Gateway) internalError(o *Outcome, doing string, err error) {
	g.log.Error(doing, zap.Error(err))
	if StorageUnreachable(err) {
		o.storageUnreachable(openAIAPI, doing)
		return
	}
	o.fail(openAIAPI, &providers.Error{Status: http.StatusInternalServerError, Type: "server_error",
		Message: "the gateway failed " + doing})
}

// storageUnreachable answers 503 with retry-after: 1 for a request that
// needs the storage while it cannot be reached, in the API's shape.
func (o *Outcome) storageUnreachable(a *api, doing string) {
	setHeader(o.Header, "Retry-After", "1")
	o.fail(a, &providers.Error{Status: http.StatusServiceUnavailable, Type: "server_error",
		Message: "the gateway's storage cannot be reached just now (" + doing + "); try again shortly"})
	o.RetryAfter = time.Second
}

// guarded returns the store with guard, which every record goes through
// before it is stored.
func (rs ResponseStore) guarded(guard func(rec []byte) []byte) ResponseStore {
	rs.guard = guard
	return rs
}
