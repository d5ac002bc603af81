package routing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/state"
)

// Channel is the publish/subscribe channel of the routers' messages.
const Channel = "routing"

// Shared is how a Router reaches the other instances of a cluster.
type Shared struct {
	// PubSub carries breaker openings and closings and cool-downs to the
	// other instances at once.
	PubSub state.PubSub
	// Deadlines keep the breakers' openings and the cool-downs for the
	// instances that start later or missed a message. Optional: without
	// them, only messages are exchanged.
	Deadlines state.Deadlines
	// Logger receives what could not be shared. Default: none.
	Logger *zap.Logger
}

// Keys of the deadlines: an opened breaker's, a cool-down's.
func openKey(target string) string { return "routing/open/" + target }
func coolKey(target string) string { return "routing/cool/" + target }

// link is a Router's connection to the other instances: changes go out
// through a queue, so that the request path never waits for the shared
// state.
type link struct {
	r       *Router
	s       Shared
	id      string
	log     *zap.Logger
	queue   chan Change
	dropped atomic.Uint64
}

// queueSize bounds the changes waiting to be shared; beyond it changes
// are dropped (and counted): the other instances then find out by
// themselves.
const queueSize = 256

// shareTimeout bounds each exchange with the shared state.
const shareTimeout = 5 * time.Second

// Share links the router to the other instances of a cluster until stop
// is called: its breakers' openings and closings and its cool-downs are
// published (and kept as deadlines), and theirs are applied here. Each
// instance keeps its own counts; only the transitions travel. Share
// subscribes and loads the deadlines in force before it returns (waiting
// at most as long as ctx allows: a subscription not live by then catches
// up once it is); nothing of it runs on the request path.
func (r *Router) Share(ctx context.Context, s Shared) (stop func(), err error) {
	if s.PubSub == nil {
		return nil, errors.New("routing: sharing needs a publish/subscribe state")
	}
	l := &link{r: r, s: s, id: instanceID(), log: s.Logger, queue: make(chan Change, queueSize)}
	if l.log == nil {
		l.log = zap.NewNop()
	}
	sub, err := s.PubSub.Subscribe(ctx, Channel)
	if err != nil {
		return nil, fmt.Errorf("routing: subscribing to %s: %w", Channel, err)
	}
	l.load(ctx)
	if !r.shared.CompareAndSwap(nil, l) {
		_ = sub.Close()
		return nil, errors.New("routing: the router is shared already")
	}
	run, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		defer l.recover("following the other instances")
		l.follow(run, sub)
	})
	wg.Go(func() {
		defer l.recover("telling the other instances")
		l.publish(run)
	})
	return func() {
		r.shared.CompareAndSwap(l, nil)
		cancel()
		_ = sub.Close()
		wg.Wait()
	}, nil
}

func instanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (l *link) recover(what string) {
	if v := recover(); v != nil {
		l.log.Error("routing: panic "+what+"; sharing stopped", zap.Any("panic", v))
	}
}

// send queues a local change for the other instances.
func (l *link) send(c Change) {
	if !c.Cooldown && c.To == HalfOpen {
		return // each instance goes half-open by itself when the time comes
	}
	select {
	case l.queue <- c:
	default:
		l.dropped.Add(1)
	}
}

// follow applies the other instances' messages; a resync (messages may
// have been lost) reloads the deadlines.
func (l *link) follow(ctx context.Context, sub state.Subscription) {
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-sub.Messages():
			if !ok {
				return
			}
			if m.Resync {
				l.load(ctx)
				continue
			}
			l.apply(m.Payload)
		}
	}
}

// load applies the deadlines in force: breakers opened and cool-downs
// started by any instance.
func (l *link) load(ctx context.Context) {
	if l.s.Deadlines == nil || len(l.r.list) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, shareTimeout)
	defer cancel()
	keys := make([]string, 0, 2*len(l.r.list))
	for _, t := range l.r.list {
		keys = append(keys, openKey(t.key), coolKey(t.key))
	}
	untils, err := l.s.Deadlines.GetDeadlines(ctx, keys...)
	if err != nil {
		l.log.Warn("routing: reading the breakers and cool-downs of the other instances failed; they apply here once announced again", zap.Error(err))
		return
	}
	now := l.r.now()
	for i, t := range l.r.list {
		if u := untils[2*i]; !u.IsZero() {
			t.openRemote(now, u.UnixNano())
		}
		if u := untils[2*i+1]; !u.IsZero() {
			t.coolRemote(now, u.UnixNano())
		}
	}
}

// apply applies one message of another instance.
func (l *link) apply(payload []byte) {
	m, err := parseMessage(payload)
	if err != nil {
		l.log.Warn("routing: ignoring a message", zap.Error(err))
		return
	}
	if m.instance == l.id {
		return
	}
	t := l.r.targets[m.target]
	if t == nil {
		return // a target this configuration does not route to
	}
	now := l.r.now()
	switch m.kind {
	case msgOpen:
		t.openRemote(now, m.until)
	case msgClose:
		t.closeRemote()
	case msgCool:
		t.coolRemote(now, m.until)
	}
}

// publish shares the queued changes: a deadline, then a message.
func (l *link) publish(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-l.queue:
			l.share(ctx, c)
			if n := l.dropped.Swap(0); n > 0 {
				l.log.Warn("routing: changes were not shared, the queue was full; the other instances find out by themselves",
					zap.Uint64("dropped", n))
			}
		}
	}
}

func (l *link) share(ctx context.Context, c Change) {
	ctx, cancel := context.WithTimeout(ctx, shareTimeout)
	defer cancel()
	m := message{instance: l.id, target: c.Target.key, until: c.Until.UnixNano()}
	var err error
	switch {
	case c.Cooldown:
		m.kind = msgCool
		err = l.extend(ctx, coolKey(m.target), &m)
	case c.To == Open:
		m.kind = msgOpen
		err = l.extend(ctx, openKey(m.target), &m)
	case c.To == Closed:
		m.kind, m.until = msgClose, 0
		if l.s.Deadlines != nil {
			err = l.s.Deadlines.ClearDeadline(ctx, openKey(m.target))
		}
	default:
		return
	}
	if err == nil {
		err = l.s.PubSub.Publish(ctx, Channel, m.append(nil))
	}
	if err != nil {
		l.log.Warn("routing: telling the other instances failed; they find out by themselves",
			zap.String("target", m.target), zap.String("change", m.kind.String()), zap.Error(err))
	}
}

// extend keeps m's deadline and takes the later one the store holds.
func (l *link) extend(ctx context.Context, key string, m *message) error {
	if l.s.Deadlines == nil {
		return nil
	}
	u, err := l.s.Deadlines.ExtendDeadline(ctx, key, time.Unix(0, m.until))
	if err == nil && u.UnixNano() > m.until {
		m.until = u.UnixNano()
	}
	return err
}

// coolRemote applies a cool-down another instance started.
func (t *Target) coolRemote(now, until int64) {
	until = min(until, now+int64(t.r.cfg.Cooldown.Max))
	if until <= now {
		return
	}
	held, started := t.cool(now, time.Duration(until-now))
	for {
		s := t.h.sharedCool.Load()
		if s >= held || t.h.sharedCool.CompareAndSwap(s, held) {
			break
		}
	}
	if started {
		st := State(t.h.state.Load())
		t.r.changed(Change{Target: t, From: st, To: st, Cooldown: true, Until: time.Unix(0, held),
			Reason: ReasonRemote, Remote: true})
	}
}

// message is what instances tell each other:
//
//	v1 <instance> open|close|cool <until, Unix ms> <target>
//
// The target comes last: a model's name may hold spaces.
type message struct {
	instance string
	kind     msgKind
	until    int64 // Unix ns, at millisecond precision on the wire
	target   string
}

type msgKind uint8

const (
	msgOpen msgKind = iota + 1
	msgClose
	msgCool
)

var msgKinds = [...]string{msgOpen: "open", msgClose: "close", msgCool: "cool"}

func (k msgKind) String() string {
	if int(k) < len(msgKinds) && k > 0 {
		return msgKinds[k]
	}
	return "unknown"
}

func (m message) append(dst []byte) []byte {
	dst = append(dst, "v1 "...)
	dst = append(dst, m.instance...)
	dst = append(dst, ' ')
	dst = append(dst, m.kind.String()...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, m.until/int64(time.Millisecond), 10)
	dst = append(dst, ' ')
	return append(dst, m.target...)
}

// maxMessage bounds a message: a target's key is a provider's name and a
// model's, far shorter.
const maxMessage = 4096

func parseMessage(b []byte) (message, error) {
	if len(b) > maxMessage {
		return message{}, fmt.Errorf("message of %d bytes is too long", len(b))
	}
	f := strings.SplitN(string(b), " ", 5)
	if len(f) != 5 || f[0] != "v1" || f[1] == "" || f[4] == "" {
		return message{}, fmt.Errorf("message %q is not v1 <instance> <kind> <until> <target>", b)
	}
	m := message{instance: f[1], target: f[4]}
	for k, name := range msgKinds {
		if k > 0 && f[2] == name {
			m.kind = msgKind(k)
		}
	}
	if m.kind == 0 {
		return message{}, fmt.Errorf("message kind %q is not open, close or cool", f[2])
	}
	ms, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil || ms < 0 || ms > maxUnixMS {
		return message{}, fmt.Errorf("message time %q is not a time in Unix milliseconds", f[3])
	}
	m.until = ms * int64(time.Millisecond)
	return m, nil
}

// maxUnixMS is the last Unix millisecond whose nanoseconds fit an int64.
const maxUnixMS = math.MaxInt64 / int64(time.Millisecond)
