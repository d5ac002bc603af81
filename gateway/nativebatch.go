package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/quota"
)

// This file is what the core gives the batch engine for native parts, the
// lines a batch hands to a provider's own batch API
// (docs/design/native-batches.md): the transport its requests take (the
// provider's Upstream, as every provider request does) and the accounting
// of what those lines cost, at the provider's batch price.

// NativeSend returns the transport of a provider's batch API: each
// request goes through up as a live request to the provider does (its
// credentials, its reverse_proxy, the scrubbing of its answers), with its
// body streamed when it is an upload, and its answer handed on as it
// arrives. The host does not retry nor fall back: the batch engine does
// what is safe to do again.
func NativeSend(up Upstream) providers.Send {
	return func(ctx context.Context, req providers.Request) (providers.Answer, error) {
		pr, pw := io.Pipe()
		w := &pipeWriter{header: make(http.Header), pw: pw, started: make(chan struct{})}
		done := make(chan error, 1)
		go func() {
			err := up.Send(ctx, req, false, w)
			if err == nil && !w.begun() {
				err = errors.New("the provider's upstream wrote no answer")
			}
			_ = pw.CloseWithError(err) // nil: the body ends with io.EOF
			done <- err
		}()
		select {
		case <-w.started:
		case err := <-done:
			select {
			case <-w.started: // answered, then the body ended
			default:
				return providers.Answer{}, err
			}
		}
		return providers.Answer{Status: w.status, Header: w.sent, Body: pr}, nil
	}
}

// pipeWriter is the ResponseWriter an Upstream writes a batch API's
// answer into: its status and headers are taken at WriteHeader, and its
// body goes through a pipe to the reader of the Answer.
type pipeWriter struct {
	header  http.Header // what the upstream writes into
	sent    http.Header // the headers as they were at WriteHeader
	status  int
	pw      *io.PipeWriter
	once    sync.Once
	started chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

// WriteHeader takes the status and the headers of the answer; an
// informational status (1xx) is not the answer.
func (w *pipeWriter) WriteHeader(status int) {
	if status < http.StatusOK {
		return
	}
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.started)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(b)
}

// FlushError does nothing: every write reaches the reader at once.
func (w *pipeWriter) FlushError() error { return nil }

// Flush does nothing, as FlushError.
func (w *pipeWriter) Flush() {}

// begun reports whether the answer's status was written.
func (w *pipeWriter) begun() bool {
	select {
	case <-w.started:
		return true
	default:
		return false
	}
}

// NativeAccounting returns what the batch engine does about the cost of
// native parts: estimates and reservations against the budgets of the key
// that created the batch before a part is sent, and each result's usage
// and cost at the provider's batch price once it is stored.
//
// Reservations are held by this process (across config reloads) and in
// the shared state while the quota's hold lasts: a reservation is what
// admits a part before it is sent, while what the part's lines then cost
// is counted line by line as their results arrive (Settle), once per line
// even when a crash repeats a Settle.
func (g *Gateway) NativeAccounting() batch.NativeAccounting { return nativeAccounting{g} }

// nativeAccounting is the gateway's batch.NativeAccounting.
type nativeAccounting struct{ g *Gateway }

// reservations are the admissions held for native parts, by part
// marker: one per part, however often the engine asks (a repeat after a
// crash of this process finds none and reserves again; the first one's
// lapses with the quota's hold).
var reservations sync.Map // marker -> *quota.Admission

// settledMarkTTL is how long the mark that a native line was settled
// lives in the shared state (one small counter a line): a repeat comes
// when a part's results are collected again after a crash, by the
// restarted process or the instance that takes the part over, well
// within it.
const settledMarkTTL = 24 * time.Hour

// nativeAPIs are the endpoints native parts run, by endpoint path.
var nativeAPIs = map[string]API{batch.EndpointChat: APIChat, batch.EndpointEmbeddings: APIEmbeddings}

// Estimate bounds what one request costs at the batch price of the
// provider's model, as the admission of a live request bounds it.
func (a nativeAccounting) Estimate(endpoint, provider, model string, body []byte) int64 {
	p := a.g.providers[provider]
	if p == nil {
		return 0
	}
	u, _ := estimateUsage(nativeRequest(endpoint, body))
	entry, ok := a.g.prices.Lookup(p.Type, model)
	if !ok {
		return 0
	}
	entry = entry.Batch()
	cost, _ := entry.Cost(u)
	if u.PromptTokens > 0 {
		w := u
		w.CacheWriteTokens = w.PromptTokens
		if wc, ok := entry.Cost(w); ok {
			cost = max(cost, wc)
		}
	}
	return int64(cost)
}

// nativeRequest is what the estimate reads of a batch request's body.
func nativeRequest(endpoint string, body []byte) *request {
	api, ok := nativeAPIs[endpoint]
	if !ok {
		api = APIChat
	}
	rq := &request{endpoint: endpointOf(api), body: body}
	if api == APIEmbeddings {
		if er, err := providers.ValidateEmbeddings(body); err == nil {
			rq.embeddings = &er
		}
	}
	return rq
}

// Reserve admits a native part by the budgets of the key that created
// its batch, holding r.Amount from them, or refuses it with the answer
// each of its lines gets: a spent budget's 429, a suspended account's 403,
// an unpriced model's 403 where budgets may not spend on one.
func (a nativeAccounting) Reserve(ctx context.Context, r batch.Reservation) (*batch.Response, error) {
	g := a.g
	if _, held := reservations.Load(r.ID); held {
		return nil, nil
	}
	key, err := g.batchLineKey(ctx, batch.Request{Owner: r.Owner, KeyID: r.KeyID, KeyName: r.KeyName})
	if err != nil {
		// Gone (the runner cancels the batch at its next step) or not
		// readable now: nothing decided.
		return nil, fmt.Errorf("the key of batch %s: %w", r.BatchID, err)
	}
	if g.blocked != nil && g.blocked(key) {
		g.obs.Suspended()
		return &batch.Response{Status: http.StatusForbidden, Body: AccountSuspended().JSON()}, nil
	}
	if g.limits.Quota == nil || g.limits.Policies == nil {
		return nil, nil
	}
	s := g.limits.Policies.Subjects(key)
	s.Key.Limits, s.Owner.Limits = quota.Limits{}, quota.Limits{}
	if !budgeted(&s) {
		return nil, nil
	}
	if !a.priced(r.Provider, r.Model) && !g.limits.Policies.AllowsUnpriced() {
		g.obs.Refused("unpriced", "key")
		e := &providers.Error{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "model_not_priced", Param: "model",
			Message: fmt.Sprintf("the model %q has no batch price, and the budget could not count what it spends", r.Model)}
		return &batch.Response{Status: e.Status, Body: e.JSON()}, nil
	}
	adm, ref, err := g.limits.Quota.Admit(ctx, s, quota.Ask{EstimatedTokens: 1, EstimatedCost: pricing.Money(r.Amount)})
	if err != nil {
		return nil, fmt.Errorf("reserving from the budgets: %w", err)
	}
	if ref != nil {
		g.obs.Refused(ref.Limit.String(), ref.Subject.String())
		e := &providers.Error{Status: http.StatusTooManyRequests, Type: ref.Type(), Code: ref.Code(), Message: ref.Message()}
		return &batch.Response{Status: e.Status, Body: e.JSON()}, nil
	}
	if prev, loaded := reservations.LoadOrStore(r.ID, adm); loaded && prev != adm {
		_ = adm.Done(ctx, quota.Actual{Priced: true}) // reserved meanwhile: one is enough
	}
	return nil, nil
}

// priced reports whether the model of provider has a price.
func (a nativeAccounting) priced(provider, model string) bool {
	p := a.g.providers[provider]
	if p == nil {
		return false
	}
	_, ok := a.g.prices.Lookup(p.Type, model)
	return ok
}

// Release gives back the reservation of part r.ID: what its lines cost
// was spent as they were settled.
func (a nativeAccounting) Release(ctx context.Context, r batch.Reservation) {
	if v, ok := reservations.LoadAndDelete(r.ID); ok {
		_ = v.(*quota.Admission).Done(ctx, quota.Actual{Priced: true})
	}
}

// Settle counts one result of a native part, once per line: its usage
// and its cost at the batch price against the budgets of the key that
// created the batch, in the usage records and in what the Observer is
// told (metrics). An error answer costs nothing: providers do not bill
// failed batch requests.
func (a nativeAccounting) Settle(ctx context.Context, s batch.Settlement) {
	g := a.g
	r := s.Reservation
	p := g.providers[r.Provider]
	if p == nil || s.Status < http.StatusOK || s.Status >= http.StatusMultipleChoices {
		return
	}
	log := g.log.Named("batch").With(zap.String("batch_id", r.BatchID), zap.String("custom_id", s.CustomID))
	key, err := g.batchLineKey(ctx, batch.Request{Owner: r.Owner, KeyID: r.KeyID, KeyName: r.KeyName})
	if errors.Is(err, errKeyGone) {
		// The provider billed the line all the same: it is counted under
		// the key as the batch recorded it.
		key, err = &Key{ID: r.KeyID, Name: r.KeyName, Owner: OwnerName(r.Owner)}, nil
	}
	if err != nil {
		log.Warn("the key of a native batch line could not be read; its usage is not counted", zap.Error(err))
		return
	}
	api, ok := nativeAPIs[r.Endpoint]
	if !ok {
		api = APIChat
	}
	o := &Outcome{Status: s.Status, Key: key, Start: time.Now(), Target: Target{Provider: p, Model: r.Model}, Settled: true}
	o.Usage = providers.ReadAnswerUsage(s.Body)
	if api == APIEmbeddings {
		// An embeddings list's prompt_tokens are its input.
		o.Usage.Embedding, o.Usage.Prompt = o.Usage.Prompt, 0
	}
	if entry, ok := g.prices.Lookup(p.Type, r.Model); ok && o.Usage.Known {
		o.Cost, o.Priced = entry.Batch().Cost(pricingUsage(o.Usage))
	}
	if !a.spend(ctx, key, o, s.LineID, log) {
		return // settled before (a crash repeated the collection)
	}
	g.recordUsage(o, admission{})
	g.obs.Answered(&Call{API: api, Key: key, Batch: &BatchLine{BatchID: r.BatchID, CustomID: s.CustomID}, Log: log}, o)
}

// spend counts o's cost against the budgets of key, once per line id; it
// reports false when the line was counted before. Without a quota engine
// lines are counted once per process.
func (a nativeAccounting) spend(ctx context.Context, key *Key, o *Outcome, lineID string, log *zap.Logger) bool {
	g := a.g
	if g.limits.Quota == nil || g.limits.Policies == nil {
		_, seen := settledHere.LoadOrStore(lineID, true)
		return !seen
	}
	s := g.limits.Policies.Subjects(key)
	cost := pricing.Money(0)
	if o.Priced {
		cost = o.Cost
	}
	first, err := g.limits.Quota.Spend(ctx, s, cost, lineID, settledMarkTTL)
	if err != nil {
		// Counted in the usage records all the same, which budgets are
		// seeded from when their counters are lost.
		log.Warn("a native batch line's cost could not be counted against budgets", zap.Error(err))
		return true
	}
	return first
}

// settledHere are the native lines settled by this process when there is
// no quota engine to mark them in the shared state.
var settledHere sync.Map
