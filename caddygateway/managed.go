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

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/keys"
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
	return gateway.FromManaged(k), false
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

// ExposureReporter tells the owner of a newly exposed key and applies its
// policy (auto_revoke): see gateway.ExposureReporter.
type ExposureReporter = gateway.ExposureReporter

// SetExposureReporter makes r the reporter of exposed keys.
// modelgate_secret_scanning registers itself, so that exposures the gateway
// finds are told as partner alerts are (with several such handlers, the one
// provisioned last).
func (a *App) SetExposureReporter(r ExposureReporter) { a.gw.SetExposureReporter(r) }

// Exposed marks the managed key with this secret's digest exposed, as e
// says where (gateway.Gateway.Exposed): found is false when no managed key
// has that digest. The first exposure of a key is logged, emitted as
// key_exposed and handed to r (nil: the registered reporter).
func (a *App) Exposed(ctx context.Context, digest [32]byte, e keys.Exposure, r ExposureReporter) (found bool, err error) {
	return a.gw.Exposed(ctx, digest, e, r)
}
