package caddygateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/providers"
)

// defaultKeyRefresh is how often managed keys are reloaded from storage.
const defaultKeyRefresh = 10 * time.Second

// provisionManagedKeys loads the managed keys of the app's storage, so that
// they work from the first request this config serves.
func (a *App) provisionManagedKeys(ctx caddy.Context) error {
	if a.KeyRefresh < 0 {
		return fmt.Errorf("key_refresh must not be negative")
	}
	if a.KeyRefresh == 0 {
		a.KeyRefresh = caddy.Duration(defaultKeyRefresh)
	}
	a.managed = keys.NewManager(a.storage, "modelgate")
	a.exposures = newExposureQueue(a.checkExposure, a.logger)
	a.managed.Changed = func(id string) {
		a.publish(channelKeys, id)
		// A deleted key's batches are cancelled at the runner's next
		// step (Live.KeyGone): let it be now.
		a.wakeRunner()
	}
	// A storage that cannot be read now, or one unreadable key record,
	// must not keep the config (and the static keys) from loading: the
	// keys that could be read work, and the refresher tries again.
	if err := a.managed.Refresh(ctx); err != nil {
		a.logger.Error("loading managed keys; those that could be read work, the rest are tried again at each refresh", zap.Error(err))
	}
	return nil
}

// startKeyRefresh reloads the managed keys and the accounts every
// key_refresh, which is how keys created or deleted and accounts changed
// on other instances arrive here, writes when keys were last used, and
// prunes the audit log.
func (a *App) startKeyRefresh() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Duration(a.KeyRefresh))
		defer t.Stop()
		prune := time.NewTicker(auditPruneInterval)
		defer prune.Stop()
		a.pruneAudit(ctx)
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := a.managed.Refresh(ctx); err != nil && ctx.Err() == nil {
					a.logger.Error("reloading managed keys", zap.Error(err))
				}
				a.refreshAccounts(ctx)
			case <-prune.C:
				a.pruneAudit(ctx)
			}
		}
	}()
	a.stopKeys = func() {
		cancel()
		wg.Wait()
		// A last refresh writes the last-used times of this config.
		fctx, fcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer fcancel()
		if err := a.managed.Refresh(fctx); err != nil {
			a.logger.Warn("saving when managed keys were last used", zap.Error(err))
		}
	}
}

func (a *App) stopKeyRefresh() {
	if a.stopKeys != nil {
		a.stopKeys()
		a.stopKeys = nil
	}
}

// managedKey returns the managed key with this secret, if it is one that
// works: known and not expired. malformed reports an mgk_ secret whose
// checksum (or length or alphabet) is wrong, refused without a lookup.
func (a *App) managedKey(secret string, digest [32]byte) (key *Key, malformed bool) {
	if !strings.HasPrefix(secret, keys.Prefix) {
		return nil, false
	}
	if !keys.WellFormed(secret) {
		return nil, true
	}
	k, ok := a.managed.Lookup(digest)
	if !ok {
		return nil, false
	}
	a.managed.Touch(k.ID)
	return &Key{Name: k.Name, Owner: k.Owner, ID: k.ID, Models: k.Models, Limits: k.Limits, Budget: k.Budget}, false
}

// allows reports whether the key may use the model as the client named it:
// keys without a models list may use every model; a list holds model
// names as clients send them (an alias, a bare name, "<provider>/<model>")
// and "<provider>/*" for every model of a provider.
func (k *Key) allows(model string) bool {
	if k == nil || len(k.Models) == 0 {
		return true
	}
	for _, m := range k.Models {
		if m == model {
			return true
		}
		if p, ok := strings.CutSuffix(m, "/*"); ok && strings.HasPrefix(model, p+"/") {
			return true
		}
	}
	return false
}

// modelNotAllowed is the 403 for a key limited to other models.
func modelNotAllowed(model string) *providers.Error {
	return &providers.Error{
		Status: http.StatusForbidden, Type: "invalid_request_error", Code: "model_not_allowed", Param: "model",
		Message: fmt.Sprintf("this API key may not use the model %q", model),
	}
}

// RequestKey returns the key modelgate_auth authenticated the request
// with, or nil when it did not run (or the request carried no valid key).
func RequestKey(r *http.Request) *Key {
	k, _ := caddyhttp.GetVar(r.Context(), ctxKeyVar).(*Key)
	return k
}

// requestKey is RequestKey, as this package calls it.
func requestKey(r *http.Request) *Key { return RequestKey(r) }

// ManagedKeys returns the manager of the app's managed keys, which the key
// administration and secret-scanning modules work on.
func (a *App) ManagedKeys() *keys.Manager { return a.managed }
