package caddygateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/internal/storage"
	"github.com/modelgate/modelgate/state"
)

// This file wires the app's shared state (see docs/design/state.md): what Caddy's
// storage cannot do — counters with expiry, leases, publish/subscribe. One
// instance keeps it in process (the default, nothing to configure);
// instances on a Redis storage share it on that Redis, so that a key
// created or deleted on one instance, or a batch cancelled there, reaches
// every instance at once, and the limits of the operations count across
// them.

// SharedStater is a storage that offers shared state to every instance
// that shares it, as caddy.storage.modelgate_redis does.
type SharedStater interface {
	SharedState(logger *zap.Logger) (state.State, error)
}

// Values of App.State.
const (
	stateLocal  = "local"
	stateShared = "shared"
)

// Channels of the shared state's publish/subscribe.
const (
	channelKeys    = "keys"    // payload: the id of a key created, deleted or marked exposed
	channelBatches = "batches" // payload: the id of a batch created or cancelled
	// channelAccounts (accounts.go): the id of an account changed.
)

// localStates keeps each storage's in-process state across config
// reloads, so that counters go on counting.
var localStates = caddy.NewUsagePool()

type localState struct{ state.State }

func (l localState) Destruct() error { return l.Close() }

// provisionState picks the state: the storage's shared one when it offers
// one (unless state is local), else the in-process one.
func (a *App) provisionState() error {
	a.health = new(health)
	switch a.State {
	case "", stateLocal, stateShared:
	default:
		return fmt.Errorf("state: %q is not local or shared", a.State)
	}
	if ss, ok := a.storage.(SharedStater); ok && a.State != stateLocal {
		st, err := ss.SharedState(a.logger.Named("state"))
		if err != nil {
			return fmt.Errorf("shared state: %w", err)
		}
		a.state, a.stateShared, a.closeState = st, true, st.Close
		return nil
	}
	if a.State == stateShared {
		return errors.New("state shared needs a storage that offers shared state, such as storage modelgate_redis")
	}
	v, _, err := localStates.LoadOrNew(a.storageID, func() (caddy.Destructor, error) {
		return localState{state.NewLocal()}, nil
	})
	if err != nil {
		return err
	}
	a.state = v.(localState).State
	a.closeState = func() error { _, err := localStates.Delete(a.storageID); return err }
	return nil
}

// cleanupState releases the state Provision took.
func (a *App) cleanupState() {
	if a.closeState != nil {
		_ = a.closeState()
		a.closeState = nil
	}
}

// publish sends payload on channel to every instance sharing the state,
// without holding up the caller; a message that cannot be sent is logged
// (the others will see the change at their next key_refresh or poll).
func (a *App) publish(channel, payload string) {
	if !a.stateShared {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.state.Publish(ctx, channel, []byte(payload)); err != nil {
			a.logger.Warn("telling the other instances failed; they will catch up at their next refresh",
				zap.String("channel", channel), zap.Error(err))
		}
	}()
}

// health is the app's view of what it depends on, for the log and the
// readiness endpoint.
type health struct {
	stateDown atomic.Bool
	since     atomic.Int64 // Unix ms of the last change
}

// startShared follows the shared state: messages from the other
// instances, and whether the state can be reached. It runs from Start to
// Stop.
func (a *App) startShared() {
	if !a.stateShared {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer recoverLog(a.logger, "following the shared state")
		a.follow(ctx)
	}()
	go func() {
		defer wg.Done()
		defer recoverLog(a.logger, "checking the shared state")
		a.watchState(ctx)
	}()
	a.stopShared = func() { cancel(); wg.Wait() }
}

// follow applies the other instances' messages: a key to reload, a batch
// to look at now. A message lost while the state was unreachable arrives
// as a resync: every key is reloaded and the runner woken.
func (a *App) follow(ctx context.Context) {
	sub, err := a.state.Subscribe(ctx, channelKeys, channelBatches, channelAccounts)
	if err != nil {
		a.logger.Error("subscribing to the shared state; key changes arrive at key_refresh", zap.Error(err))
		return
	}
	defer func() { _ = sub.Close() }()
	// The keys were loaded at Provision, before this subscription was
	// live: a key created or deleted elsewhere in between told nobody
	// here. Catch up once now that messages arrive. (A subscription not
	// live yet sends Resync when it is.)
	if sub.Live() {
		a.resync(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-sub.Messages():
			if !ok {
				return
			}
			switch {
			case m.Resync:
				a.resync(ctx)
			case m.Channel == channelKeys:
				if err := a.managed.Reload(ctx, string(m.Payload)); err != nil && ctx.Err() == nil {
					a.logger.Warn("reloading a managed key another instance changed", zap.String("key_id", string(m.Payload)), zap.Error(err))
				}
				// A deleted key's batches stop here at once.
				a.wakeRunner()
			case m.Channel == channelBatches:
				a.wakeRunner()
			case m.Channel == channelAccounts:
				if err := a.accounts.Reload(ctx, string(m.Payload)); err != nil && ctx.Err() == nil {
					a.logger.Warn("reloading an account another instance changed", zap.String("account", string(m.Payload)), zap.Error(err))
				}
			}
		}
	}
}

// resync reloads every managed key and wakes the batch runner: what to do
// when messages from the other instances may have been missed.
func (a *App) resync(ctx context.Context) {
	if err := a.managed.Refresh(ctx); err != nil && ctx.Err() == nil {
		a.logger.Error("reloading managed keys", zap.Error(err))
	}
	a.refreshAccounts(ctx)
	a.wakeRunner()
}

// watchState pings the shared state and says in the log when it can no
// longer be reached, and when it can again.
func (a *App) watchState(ctx context.Context) {
	t := time.NewTicker(stateCheckInterval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, stateCheckInterval)
		err := a.state.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		a.setStateDown(err != nil, err)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setStateDown records whether the shared state can be reached, and says
// in the log when that changes. watchState's pings set it both ways; a
// request that found the state unreachable sets it down at once, so that
// the requests after it do not wait for the next ping to learn it.
func (a *App) setStateDown(down bool, err error) {
	if a.health.stateDown.Swap(down) == down {
		return
	}
	a.health.since.Store(time.Now().UnixMilli())
	if down {
		a.logger.Warn("shared state unreachable: serving on; limits and budgets count on this instance only, and keys created or deleted elsewhere arrive at key_refresh, until it is back",
			zap.Error(err))
	} else {
		a.logger.Info("shared state reachable again")
	}
}

// stateCheckInterval is how often the shared state is pinged.
const stateCheckInterval = 2 * time.Second

// Readiness is what the readiness endpoint reports.
type Readiness struct {
	// Ready is false when something the gateway depends on cannot be
	// reached: then Problems says what, and since when.
	Ready    bool              `json:"ready"`
	State    string            `json:"state"` // "local" or "shared"
	Problems map[string]string `json:"problems,omitempty"`
}

// Ready checks the app's storage and its shared state.
func (a *App) Ready(ctx context.Context) Readiness {
	r := Readiness{Ready: true, State: stateLocal, Problems: map[string]string{}}
	// Both probes at once: a Redis that hangs costs each its whole
	// timeout, and the answer should not take twice that.
	ctx, cancel := context.WithTimeout(ctx, stateCheckInterval)
	defer cancel()
	stateErr := make(chan error, 1)
	if a.stateShared {
		r.State = stateShared
		go func() { stateErr <- a.state.Ping(ctx) }()
	} else {
		stateErr <- nil
	}
	if _, err := a.storage.Load(ctx, "modelgate/readiness-probe"); err != nil && !storage.IsNotExist(err) {
		r.Problems["storage"] = "unreachable: files, batches, stored responses and changes to managed keys are unavailable; existing keys and live requests work"
	}
	if err := <-stateErr; err != nil {
		r.Problems["state"] = "unreachable: limits and budgets count on this instance only; key changes elsewhere arrive at key_refresh"
	}
	r.Ready = len(r.Problems) == 0
	if r.Ready {
		r.Problems = nil
	}
	return r
}

// StorageUnreachable reports whether err says that the storage (or the
// shared state) could not be reached, rather than that it refused or failed
// the operation: a 503 worth retrying shortly, not a 500
// (gateway.StorageUnreachable).
func StorageUnreachable(err error) bool { return gateway.StorageUnreachable(err) }

// recoverLog logs a panic of a background goroutine instead of ending the
// process.
func recoverLog(log *zap.Logger, doing string) {
	if v := recover(); v != nil {
		log.Error("panic while "+doing, zap.String("panic", fmt.Sprint(v)))
	}
}
