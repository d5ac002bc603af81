package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/providers"
)

// This file runs batch lines: each one a call served as a live request is
// (validation, routing, translation, fallback, each provider's Upstream),
// with no rate limits (the batch engine paces itself) and the outcome
// turned into the line's result as data.

// BatchExecutor returns the executor batch lines run through: the calls
// live requests make, served in-process. Tools and benchmarks may run
// requests through it as the batch runner does.
func (g *Gateway) BatchExecutor() batch.Executor { return batchExecutor{g} }

// batchExecutor runs batch requests as calls of the gateway.
type batchExecutor struct{ g *Gateway }

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
func (g *Gateway) batchLineKey(ctx context.Context, req batch.Request) (*Key, error) {
	switch {
	case req.KeyID != "" && g.managed != nil:
		mk, ok := g.managed.LookupID(req.KeyID)
		if !ok {
			var err error
			if mk, err = g.managed.Get(ctx, req.KeyID); errors.Is(err, keys.ErrNotFound) {
				return nil, errKeyGone
			} else if err != nil {
				return nil, fmt.Errorf("reading key %s: %w", req.KeyID, err)
			}
		}
		if mk.Owner != req.Owner {
			return nil, errKeyGone // not the owner's key: no record of this owner names it
		}
		return FromManaged(mk), nil
	case req.KeyName != "":
		// A batch of a static key is kept under its storage owner; one
		// created before static keys' owners were kept apart, under its
		// name (no managed key's batch records no key id).
		if k := g.static[req.KeyName]; k != nil && (k.StorageOwner() == req.Owner || k.Owner == req.Owner) {
			return k, nil
		}
	}
	// A static key removed from the config, or a batch from before the
	// creating key was kept: nothing to run it under.
	return nil, errKeyGone
}

// BatchKeyGone is the batch runner's Live.KeyGone: whether the key that
// created a batch is gone, as the lines of its batch find it.
func (g *Gateway) BatchKeyGone(ctx context.Context, owner, keyID, keyName string) (bool, error) {
	_, err := g.batchLineKey(ctx, batch.Request{Owner: owner, KeyID: keyID, KeyName: keyName})
	if errors.Is(err, errKeyGone) {
		return true, nil
	}
	return false, err
}

// batchAPIs are the APIs batches run, by endpoint path.
var batchAPIs = map[string]API{
	batch.EndpointChat:       APIChat,
	batch.EndpointRerank:     APIRerank,
	batch.EndpointEmbeddings: APIEmbeddings,
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
	if !(&Key{Models: models}).Allows(model) {
		return batch.Route{}, fmt.Errorf("the API key that created the batch may not use the model %q", model)
	}
	prov, upstream, err := e.g.routes.route(endpointOf(batchAPIs[endpoint]), model)
	if err != nil {
		return batch.Route{}, err
	}
	if upstream != "" && e.g.guardsMayApply(model) {
		// A provider's batch API would take the line, and answer it, past
		// the guards: a line a guard may apply to runs in the gateway.
		upstream = ""
	}
	return batch.Route{Model: model, Provider: prov, Upstream: upstream}, nil
}

// guardsMayApply reports whether a guard may apply to a call of model,
// routed as it routes, whatever the key.
func (g *Gateway) guardsMayApply(model string) bool {
	if g.guards == nil {
		return false
	}
	targets := g.routes.resolve(model)
	models := make([]string, 0, len(targets)+1)
	models = append(models, model)
	for _, t := range targets {
		models = append(models, t.String())
	}
	return g.guards.MayApply(models)
}

// Do runs one batch request as a call of the key that created the batch,
// as it is now; its usage is accounted to that key and owner, and it
// counts against their budgets. Its models were checked when the batch
// was created. A panic, which nothing above a batch goroutine would
// catch, is the line's 500.
func (e batchExecutor) Do(ctx context.Context, req batch.Request) (resp batch.Response) {
	g := e.g
	log := g.log.Named("batch").With(zap.String("batch_id", req.BatchID), zap.String("custom_id", req.CustomID))
	key, err := g.batchLineKey(ctx, req)
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
	if g.blocked != nil && g.blocked(key) {
		g.obs.Suspended()
		return batch.Response{Status: http.StatusForbidden, Body: AccountSuspended().JSON()}
	}
	defer func() {
		if v := recover(); v != nil {
			log.Error("batch request panicked", zap.String("panic", fmt.Sprint(v)))
			resp = batchError(http.StatusInternalServerError, "server_error", "the gateway failed on this request")
		}
	}()
	api, ok := batchAPIs[req.Endpoint]
	if !ok {
		api = APIRerank
	}
	c := Call{API: api, Body: req.Body, Key: key, Batch: &BatchLine{BatchID: req.BatchID, CustomID: req.CustomID}, Log: log}
	var o Outcome
	g.Serve(ctx, &c, &o)
	if ctx.Err() != nil || o.Status == 0 {
		return batch.Response{} // stopped: no answer
	}
	return batch.Response{
		Status:     o.Status,
		RequestID:  o.RequestID,
		RetryAfter: o.RetryAfter,
		Body:       o.Body,
		Final:      o.Err != nil && !o.Retryable,
	}
}

func batchError(status int, typ, msg string) batch.Response {
	e := &providers.Error{Status: status, Type: typ, Message: msg}
	return batch.Response{Status: status, Body: e.JSON()}
}
