package caddygateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/responses"
	"github.com/modelgate/modelgate/providers/sse"
)

// This file serves OpenAI's Responses API (see docs/design/hub-and-pass-through.md), for Codex CLI
// and the OpenAI Agents SDK:
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
// answered, per owner, in the app's storage, and continues it on
// previous_response_id.

var endpointResponses = endpoint{label: "responses", serves: func(p *provider) bool { return p.Responses != nil || p.Chat != nil },
	usage: responsesUsage}

// responsesAPI ends a passed-through stream the gateway cannot finish with
// the Responses API's error event.
var responsesAPI = &api{
	writeError: WriteError,
	streamError: func(dst []byte, e *providers.Error) []byte {
		b := []byte(`{"type":"error","code":`)
		b = providers.AppendString(b, e.Code)
		b = append(b, `,"message":`...)
		b = providers.AppendString(b, e.Message)
		b = append(b, `,"param":null,"sequence_number":0}`...)
		dst = append(dst, "event: error\n"...)
		return sse.AppendData(dst, b)
	},
	// A Responses stream ends with the response's last state, or an
	// error; each event's type is its name, and in its data.
	ends: func(ev []byte) bool {
		name, data := sse.Fields(ev)
		typ := string(name)
		if typ == "" {
			typ = gjson.GetBytes(data, "type").Str
		}
		switch typ {
		case "response.completed", "response.incomplete", "response.failed", "error":
			return true
		}
		return false
	},
}

func init() { endpointResponses.api = responsesAPI }

// responseStore keeps stored responses in the app's storage:
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
// A stored response expires ttl after it was created: it is then gone for
// its owner (404), and the retention sweep deletes it (responseKind).
// What is stored counts against its owner's storage quota: stored is told
// of each write and deletion, and room refuses a response the gateway
// would store for an owner at its quota.
type responseStore struct {
	s      storage.Storage
	id     string          // the storage's identity: pending writes are per storage and key
	writes *sync.WaitGroup // the app's writes in flight, which its Cleanup waits for
	now    bool            // write on the request path (a shared state)

	ttl   time.Duration    // 0: kept until deleted
	clock func() time.Time // nil: time.Now
	quota *App             // counts what is stored against the owner's storage quota; nil: nothing
}

// expired reports whether the stored record rec (a translated response's
// record, or a pointer) has expired: ttl after its creation. A pointer
// from before pointers recorded it never expires here; the retention
// sweep dates it by when it was written.
func (rs responseStore) expired(rec []byte) bool {
	if rs.ttl <= 0 {
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
	return !rs.time().Before(time.Unix(created, 0).Add(rs.ttl))
}

// counted tells the storage quota that owner stores delta bytes more (or
// fewer).
func (rs responseStore) counted(ctx context.Context, owner string, delta int64) {
	if rs.quota != nil {
		rs.quota.countStored(ctx, owner, delta)
	}
}

// room refuses a response the gateway would store for owner when owner
// is at its storage quota.
func (rs responseStore) room(ctx context.Context, owner string) *providers.Error {
	if rs.quota == nil {
		return nil
	}
	_, perr := rs.quota.storageRoom(ctx, owner, "store")
	return perr
}

// time is the store's clock's time.
func (rs responseStore) time() time.Time {
	if rs.clock != nil {
		return rs.clock()
	}
	return time.Now()
}

func (rs responseStore) key(owner, id string) string {
	return path.Join(storage.OwnerDir("modelgate", owner), "responses", id+".json")
}

func (rs responseStore) load(ctx context.Context, owner, id string) ([]byte, error) {
	key := rs.key(owner, id)
	if w := pendingWrites.get(rs.id, key); w != nil {
		return w.record, nil
	}
	return rs.s.Load(ctx, key)
}

// saveLater stores record as owner's response id without waiting for the
// storage; a failure is logged. When too many writes are already waiting
// (the storage is not keeping up), or when the state is shared, it waits
// for its own.
func (rs responseStore) saveLater(ctx context.Context, owner, id string, record []byte, log *zap.Logger) {
	key := rs.key(owner, id)
	w := &pendingWrite{s: rs.s, storageID: rs.id, key: key, id: id, record: record, stored: make(chan struct{}),
		ctx: context.WithoutCancel(ctx), wg: rs.writes, log: log}
	if rs.quota != nil {
		w.written = func(ctx context.Context) { rs.counted(ctx, owner, int64(len(record))) }
	}
	if rs.now || !pendingWrites.add(w) {
		w.write()
	}
}

// delete forgets owner's response id, once a write of it still pending has
// landed (else that write would bring it back).
func (rs responseStore) delete(ctx context.Context, owner, id string) error {
	key := rs.key(owner, id)
	if p := pendingWrites.get(rs.id, key); p != nil {
		select {
		case <-p.stored:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return rs.s.Delete(ctx, key)
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
	wg        *sync.WaitGroup // the app's writes, or nil
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

// waitResponseWrites waits, at most timeout, for the app's records still
// on their way to the storage.
func (a *App) waitResponseWrites(timeout time.Duration) {
	if a.responseWrites == nil {
		return // not provisioned
	}
	done := make(chan struct{})
	go func() {
		a.responseWrites.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		a.logger.Warn("stored responses still being written at shutdown", zap.Duration("waited", timeout))
	}
}

// pointer is the record of a response a provider stores itself, and
// when the gateway learnt of it (for its expiry).
type pointer struct {
	Provider  string `json:"provider"`
	CreatedAt int64  `json:"created_at,omitempty"`
}

// validResponseID is a response id the gateway may use in a storage key.
func validResponseID(id string) bool {
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

// responses serves POST /v1/responses for owner (empty: no key, so
// nothing is stored or continued).
func (d *dispatcher) responses(w http.ResponseWriter, r *http.Request, body []byte, key *Key, store responseStore, log *zap.Logger) {
	// Only what routing needs is read here: a provider that speaks the
	// Responses API gets the request as it is (built-in tools, background,
	// whatever it takes); the rest is checked when it is translated.
	info, err := responses.Head(body)
	if err != nil {
		writeEndpointError(w, endpointResponses, "", asProviderError(err))
		return
	}
	owner := ""
	if key != nil {
		owner = key.storageOwner()
	}
	ctx := r.Context()

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
			writeStorageUnreachable(w, "reading the previous response", func(w http.ResponseWriter, pe *providers.Error) {
				writeEndpointError(w, endpointResponses, "", pe)
			})
			return
		case err != nil:
			writeEndpointError(w, endpointResponses, "", responses.NotFound(id))
			return
		default:
			if history, err = responses.History(rec); err != nil {
				writeEndpointError(w, endpointResponses, "", asProviderError(err))
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
	d.serve(w, r, key, &call{endpoint: endpointResponses, model: info.Model, body: body, history: history, log: log,
		prepare: func(p *provider, model string) (providers.Request, exchange, error) {
			if storedBy != "" && (p.name != storedBy || p.Responses == nil) {
				e := responses.NotFound(info.PreviousResponseID)
				e.Message += " Provider " + storedBy + " stores it: continue it with a model that provider serves."
				return providers.Request{}, exchange{}, e
			}
			if p.Responses != nil && history == nil {
				return passResponses(ctx, p, body, model, r.Header, info, owner, store, log)
			}
			if p.Chat == nil {
				return providers.Request{}, exchange{}, responses.NotFound(info.PreviousResponseID)
			}
			req, err := parse()
			if err != nil {
				return providers.Request{}, exchange{}, err
			}
			return translateResponses(ctx, w.Header(), p, req, history, model, info, owner, store, d.builtinTools, log)
		}})
}

// passResponses sends a Responses request to a provider that speaks the
// API itself, and keeps a pointer to the response it stores.
func passResponses(ctx context.Context, p *provider, body []byte, model string, h http.Header, info responses.Info,
	owner string, store responseStore, log *zap.Logger) (providers.Request, exchange, error) {
	preq, err := p.Responses.NativeRequest("/responses", body, model, h)
	ex := exchange{stream: info.Stream, mapError: nativeError(p), translate: func(answer []byte) ([]byte, error) {
		if info.Store && owner != "" {
			savePointer(ctx, store, owner, gjson.GetBytes(answer, "id").Str, p.name, log)
		}
		return answer, nil
	}}
	if info.Stream && info.Store && owner != "" {
		ex.tr = &pointerTap{onID: func(id string) { savePointer(ctx, store, owner, id, p.name, log) }}
	}
	return preq, ex, err
}

// translateResponses sends a Responses request through the chat hub to
// p, and stores what it answered for owner.
// The built-in tools the provider cannot run are dropped or refused as
// builtinTools says; those dropped are named in the client's header h.
func translateResponses(ctx context.Context, h http.Header, p *provider, req *responses.Request, history []byte, model string, info responses.Info,
	owner string, store responseStore, builtinTools string, log *zap.Logger) (providers.Request, exchange, error) {
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
		if rec := x.Record(); rec != nil && owner != "" {
			store.saveLater(ctx, owner, x.ID(), rec, log)
		}
	}
	ex := exchange{stream: info.Stream, mapError: p.chatErrorMapper(),
		translate: func(answer []byte) ([]byte, error) {
			hub, err := p.Chat.ChatResponse(answer)
			if err != nil {
				return nil, err
			}
			out, err := x.Response(withModel(hub, model))
			if err == nil {
				saveRecord()
			}
			return out, err
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
func loadRecord(ctx context.Context, store responseStore, owner, id string) ([]byte, error) {
	if owner == "" || !validResponseID(id) {
		return nil, storageNotExist
	}
	rec, err := store.load(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if store.expired(rec) {
		return nil, storageNotExist // for the sweep to delete
	}
	if gjson.GetBytes(rec, "provider").Exists() {
		return rec, errPointer
	}
	return rec, nil
}

var storageNotExist = errors.New("no such response")

// savePointer records that provider stores the passed-through response id.
func savePointer(ctx context.Context, store responseStore, owner, id, provider string, log *zap.Logger) {
	if !validResponseID(id) {
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

var _ providers.StreamEnder = (*hubChain)(nil)

func (c *hubChain) Close(dst []byte) []byte {
	if c.inner != nil {
		dst = c.outer.Events(dst, c.inner.Close(c.scratch[:0]))
	}
	dst = c.outer.Close(dst)
	c.done()
	return dst
}

// pointerTap passes a Responses stream through untouched and reads the
// response id from its first events, for the pointer.
type pointerTap struct {
	onID func(id string)
	seen bool
}

func (t *pointerTap) Event(dst, ev []byte) ([]byte, error) {
	if !t.seen {
		if _, data := sse.Fields(ev); len(data) > 0 {
			if id := gjson.GetBytes(data, "response.id").Str; id != "" {
				t.seen = true
				t.onID(id)
			}
		}
	}
	return append(append(dst, ev...), "\n\n"...), nil
}

func (t *pointerTap) Close(dst []byte) []byte { return dst }

func (*pointerTap) relays() {}

// serveStoredResponse answers GET and DELETE /v1/responses/{id} and GET
// /v1/responses/{id}/input_items for the key's owner: from the record the
// gateway keeps, or from the provider that stores a passed-through one.
func (h *Handler) serveStoredResponse(w http.ResponseWriter, r *http.Request, rest string) {
	who, ok := owner(w, r)
	if !ok {
		return
	}
	id, sub, _ := strings.Cut(rest, "/")
	if sub != "" && sub != "input_items" {
		writeError(w, notFound("path", "no such path: "+r.URL.Path))
		return
	}
	methods := []string{http.MethodGet, http.MethodDelete}
	if sub != "" {
		methods = methods[:1]
	}
	if !AllowMethod(w, r, methods...) {
		return
	}
	ctx := r.Context()
	store := h.app.responseStore()
	rec, err := loadRecord(ctx, store, who, id)
	switch {
	case errors.Is(err, errPointer):
		var ptr pointer
		_ = json.Unmarshal(rec, &ptr)
		h.proxyStoredResponse(w, r, who, id, rest, ptr.Provider, int64(len(rec)))
		return
	case err != nil && storage.IsNotExist(err) || errors.Is(err, storageNotExist):
		writeError(w, responses.NotFound(id))
		return
	case err != nil:
		h.internalError(w, "reading response "+id, err)
		return
	}
	switch {
	case r.Method == http.MethodDelete:
		if err := store.delete(ctx, who, id); err != nil {
			h.internalError(w, "deleting response "+id, err)
			return
		}
		store.counted(ctx, who, -int64(len(rec)))
		WriteJSON(w, http.StatusOK, responses.Deleted(id))
	case sub == "input_items":
		p, err := responses.ParseListParams(r.URL.Query())
		if err == nil {
			var out []byte
			if out, err = responses.InputItems(rec, p); err == nil {
				WriteJSON(w, http.StatusOK, out)
				return
			}
		}
		writeError(w, asProviderError(err))
	default:
		out, err := responses.StoredResponse(rec, r.URL.Query()["include[]"])
		if err != nil {
			writeError(w, asProviderError(err))
			return
		}
		WriteJSON(w, http.StatusOK, out)
	}
}

// proxyStoredResponse sends GET or DELETE of a passed-through response to
// the provider that stores it; a DELETE forgets the pointer too.
func (h *Handler) proxyStoredResponse(w http.ResponseWriter, r *http.Request, who, id, rest, name string, size int64) {
	p := h.app.dispatch.providers[name]
	if p == nil || p.Responses == nil {
		writeError(w, responses.NotFound(id))
		return
	}
	preq, err := p.Responses.NativeRequest("/responses/"+rest, nil, "", r.Header)
	if err != nil {
		writeError(w, asProviderError(err))
		return
	}
	preq.Method, preq.Body = r.Method, nil
	if r.Method == http.MethodGet {
		// The client's query stays here: the provider gets only what the
		// gateway knows of it, written anew (a provider's own parameters,
		// such as Azure's api-version, are in preq.Query already).
		q, err := responses.StoredQuery(r.URL.Query(), strings.HasSuffix(rest, "/input_items"))
		if err != nil {
			writeError(w, asProviderError(err))
			return
		}
		if q != "" {
			if preq.Query != "" {
				preq.Query += "&"
			}
			preq.Query += q
		}
	}
	status, f := p.forward(w, r, preq, exchange{translate: passThrough, mapError: nativeError(p)})
	if f != nil {
		f.write(w, openAIAPI)
		return
	}
	if r.Method == http.MethodDelete && status == http.StatusOK {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
		defer cancel()
		store := h.app.responseStore()
		if err := store.delete(ctx, who, id); err != nil {
			h.logger.Error("forgetting a response pointer", zap.String("response_id", id), zap.Error(err))
			return
		}
		store.counted(ctx, who, -size)
	}
}
