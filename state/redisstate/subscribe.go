package redisstate

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/state"
)

// Subscribe implements state.PubSub. The subscription runs on a
// connection of its own; when the connection breaks, or a ping goes
// unanswered for PingInterval, it is reported not live, reconnects with
// backoff (100ms doubling to 5s) and sends a Resync message once it is
// live again.
func (s *State) Subscribe(ctx context.Context, channels ...string) (state.Subscription, error) {
	if s.ctx.Err() != nil {
		return nil, state.ErrClosed
	}
	if len(channels) == 0 {
		return nil, errors.New("redis state: Subscribe needs a channel")
	}
	sub := &subscription{s: s, out: make(chan state.Message, 64), firstLive: make(chan struct{})}
	for _, ch := range channels {
		sub.channels = append(sub.channels, s.channel(ch))
	}
	sub.ctx, sub.cancel = context.WithCancel(s.ctx)
	go sub.run()
	select {
	case <-sub.firstLive:
	case <-ctx.Done():
	case <-s.ctx.Done():
	}
	sub.mu.Lock()
	if !sub.live {
		sub.resyncOnLive = true // the caller goes on without it
	}
	sub.mu.Unlock()
	return sub, nil
}

type subscription struct {
	s        *State
	channels []string // with the prefix
	out      chan state.Message

	ctx    context.Context
	cancel context.CancelFunc

	mu           sync.Mutex
	live         bool
	everLive     bool
	resyncOnLive bool          // Subscribe returned before it was live
	ps           *redis.PubSub // the current connection's, for Close
	firstLive    chan struct{}
	closeOnce    sync.Once
}

func (sub *subscription) Messages() <-chan state.Message { return sub.out }

func (sub *subscription) Live() bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.live
}

func (sub *subscription) Close() error {
	sub.closeOnce.Do(func() {
		sub.cancel()
		sub.mu.Lock()
		if sub.ps != nil {
			_ = sub.ps.Close() // ends a read in progress at once
		}
		sub.mu.Unlock()
	})
	return nil
}

func (sub *subscription) run() {
	defer close(sub.out)
	backoff := 100 * time.Millisecond
	var downSince time.Time
	for sub.ctx.Err() == nil {
		wasLive, err := sub.session()
		sub.setDown()
		if sub.ctx.Err() != nil {
			return
		}
		if wasLive || downSince.IsZero() {
			downSince = time.Now()
			backoff = 100 * time.Millisecond
			sub.s.log.Warn("redis subscription down; reconnecting",
				zap.Strings("channels", sub.channels), zap.Error(err))
		}
		select {
		case <-time.After(backoff):
		case <-sub.ctx.Done():
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (sub *subscription) setDown() {
	sub.mu.Lock()
	sub.live = false
	sub.ps = nil
	sub.mu.Unlock()
}

// session subscribes on a new connection and delivers its messages until
// it breaks. It reports whether it got live.
func (sub *subscription) session() (wasLive bool, err error) {
	s := sub.s
	var ps *redis.PubSub
	if s.sharded {
		ps = s.rdb.SSubscribe(sub.ctx)
	} else {
		ps = s.rdb.Subscribe(sub.ctx)
	}
	sub.mu.Lock()
	sub.ps = ps
	sub.mu.Unlock()
	defer func() { _ = ps.Close() }()
	if sub.ctx.Err() != nil {
		return false, sub.ctx.Err()
	}

	ctx, cancel := context.WithTimeout(sub.ctx, s.timeout)
	if s.sharded {
		err = ps.SSubscribe(ctx, sub.channels...)
	} else {
		err = ps.Subscribe(ctx, sub.channels...)
	}
	cancel()
	if err != nil {
		return false, err
	}
	pending := make(map[string]bool, len(sub.channels))
	for _, ch := range sub.channels {
		pending[ch] = true
	}
	var early []*redis.Message // messages between two confirmations
	for len(pending) > 0 {
		msg, err := ps.ReceiveTimeout(sub.ctx, s.timeout)
		if err != nil {
			return false, err
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				delete(pending, m.Channel)
			}
		case *redis.Message:
			early = append(early, m)
		}
	}
	if !sub.goLive() {
		return true, sub.ctx.Err()
	}
	for _, m := range early {
		if !sub.deliver(sub.message(m)) {
			return true, sub.ctx.Err()
		}
	}

	pingSent := false
	for {
		msg, err := ps.ReceiveTimeout(sub.ctx, s.ping)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && sub.ctx.Err() == nil {
				if pingSent {
					return true, errors.New("ping unanswered")
				}
				if err := ps.Ping(sub.ctx); err != nil {
					return true, err
				}
				pingSent = true
				continue
			}
			return true, err
		}
		switch m := msg.(type) {
		case *redis.Message:
			if !sub.deliver(sub.message(m)) {
				return true, sub.ctx.Err()
			}
		case *redis.Pong:
			pingSent = false
		case *redis.Subscription:
			if m.Kind == "unsubscribe" || m.Kind == "sunsubscribe" {
				// The server dropped us (a Cluster slot moved, a
				// failover): subscribe again.
				return true, errors.New("unsubscribed by the server from " + m.Channel)
			}
		}
	}
}

// goLive marks the subscription live and sends Resync when messages may
// have been missed: after an outage, or when Subscribe returned before
// the first success.
func (sub *subscription) goLive() bool {
	sub.mu.Lock()
	resync := sub.everLive || sub.resyncOnLive
	first := !sub.everLive
	sub.live, sub.everLive = true, true
	sub.mu.Unlock()
	if first {
		close(sub.firstLive)
	}
	if !first {
		sub.s.log.Info("redis subscription live again", zap.Strings("channels", sub.channels))
	}
	if resync {
		return sub.deliver(state.Message{Resync: true})
	}
	return true
}

func (sub *subscription) message(m *redis.Message) state.Message {
	return state.Message{Channel: strings.TrimPrefix(m.Channel, sub.s.channel("")), Payload: []byte(m.Payload)}
}

// deliver hands m to the receiver, waiting for it: a receiver that does
// not keep up makes Redis buffer, and past Redis's pub/sub output limit
// disconnect us, which ends in a Resync.
func (sub *subscription) deliver(m state.Message) bool {
	select {
	case sub.out <- m:
		return true
	case <-sub.ctx.Done():
		return false
	}
}
