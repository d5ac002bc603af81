package guardrails

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelgate/modelgate/providers"
)

// Direction is which way a body goes: a request to the provider, or an
// answer back to the client.
type Direction uint8

// The directions.
const (
	Request Direction = iota
	Response
)

// String returns "request" or "response", as the configuration and the
// webhook protocol name them.
func (d Direction) String() string {
	if d == Response {
		return "response"
	}
	return "request"
}

// Action is what a guard did with a body.
type Action uint8

// The actions of decisions. Error is a guard that could not decide; its
// on_error says whether the body went on (Decision.Allowed).
const (
	Allow Action = iota // nothing found, or the service allowed it
	Mask                // matches replaced by placeholders
	Block               // refused
	Log                 // found, and let through unchanged
	Error               // could not decide
)

var actionNames = [...]string{"allow", "mask", "block", "log", "error"}

// String returns the action's name, the action label of the decisions
// metric.
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "unknown"
}

// parseAction reads a configured action; "" is def.
func parseAction(s string, def Action) Action {
	switch s {
	case "mask":
		return Mask
	case "block":
		return Block
	case "log":
		return Log
	}
	return def
}

// A Decision is what one guard decided about one body or stream: for the
// metrics (guard and action) and events of the host.
type Decision struct {
	Guard     string    // the guard's name
	Index     int       // the guard's place among the engine's (Engine.Guards), for the host's tables of them
	Type      string    // pii, regex, webhook or moderation
	Direction Direction // request or response
	Action    Action    // what the guard did
	Matched   bool      // the guard found something (or its service flagged it)
	Found     []string  // what it found: detectors' kinds, a moderation's categories
	Reason    string    // why it blocked, for the client
	Err       error     // why it could not decide (Action Error), for the log only
	Allowed   bool      // the body went on (false: it blocked, or failed closed)
	Elapsed   time.Duration

	tally *Tally // the guard's, where Engine.Count counts it
}

// Verdict is the outcome of all the guards on one body.
type Verdict uint8

// The verdicts.
const (
	Allowed   Verdict = iota // the body goes on (Result.Body, masked or not)
	Blocked                  // a guard refused it
	Undecided                // a guard could not decide and fails closed
)

// A Result is what the guards decided about one body.
type Result struct {
	Verdict   Verdict
	Direction Direction
	Masked    bool // Body is not the body given
	// Body is what goes on when allowed: the body as given when nothing
	// was masked, else a new body, every byte but the masked strings kept.
	Body []byte
	// Decisions has one decision for each guard that applied, in order.
	Decisions []Decision
	// Stop is the decision that blocked, or failed closed.
	Stop *Decision
	// Err is set when the body could not be read (ErrBadJSON): nothing
	// went on.
	Err error

	// What the guards read and decide for a body of a few texts, made
	// with the result.
	in      input
	textBuf [4]text
	vals    [4]string
	decs    [2]Decision
}

// Error is the client's error for a result that did not allow the body,
// in OpenAI's shape (the host writes it in the API's own): 400
// content_blocked naming the guard, 503 guard_unavailable when a guard
// failed closed, 400 invalid_request_error for a body the guards cannot
// read. It is nil when the body is allowed.
func (r *Result) Error() *providers.Error {
	what := "request"
	if r.Direction == Response {
		what = "answer"
	}
	switch {
	case r.Err != nil:
		return &providers.Error{Status: http.StatusBadRequest, Type: "invalid_request_error",
			Code: "invalid_json", Message: fmt.Sprintf("the guards could not read the %s: %v", what, r.Err)}
	case r.Verdict == Blocked:
		return BlockedError(r.Direction, r.Stop)
	case r.Verdict == Undecided:
		return UndecidedError(r.Direction, r.Stop)
	}
	return nil
}

// BlockedError is the client's error for a body d blocked: 400,
// content_blocked, the guard named.
func BlockedError(dir Direction, d *Decision) *providers.Error {
	what := "request"
	if dir == Response {
		what = "answer"
	}
	msg := fmt.Sprintf("the %s was blocked by guard %q", what, d.Guard)
	if d.Reason != "" {
		msg += ": " + d.Reason
	}
	return &providers.Error{Status: http.StatusBadRequest, Type: "invalid_request_error",
		Code: "content_blocked", Message: msg}
}

// UndecidedError is the client's error for a body d could not check and
// failed closed on: 503, guard_unavailable. Why it failed (d.Err, which
// may name the service) is for the log, not the client.
func UndecidedError(dir Direction, d *Decision) *providers.Error {
	what := "request"
	if dir == Response {
		what = "answer"
	}
	return &providers.Error{Status: http.StatusServiceUnavailable, Type: "server_error",
		Code: "guard_unavailable", Message: fmt.Sprintf("guard %q could not check the %s; try again later", d.Guard, what)}
}

// Scope is who and what a body belongs to, for the guards' filters and
// the webhook protocol.
type Scope struct {
	// Models are the model the client named and the targets it routes
	// to ("<provider>/<model>"): a guard with models applies when any is
	// one of them.
	Models  []string
	Key     string // the key's name
	Account string // the key's owner (account)
}

// Options are what an engine needs from its host.
type Options struct {
	// Moderator reaches providers' moderation endpoints. Required when a
	// moderation guard is configured.
	Moderator Moderator
	// Client makes webhook calls. Default: a client of its own (each
	// call bounded by its guard's timeout).
	Client *http.Client
	// Tally returns the tally a guard's decisions are counted in, by the
	// guard's name: a host keeps them across its configs, so that its
	// counters go on from where they were at a reload. Nil: each guard
	// has a tally of its own.
	Tally func(guard string) *Tally
}

// An Engine applies the configured guards. It is safe for concurrent use.
type Engine struct {
	guards  []*guard
	byModel bool      // a guard applies to some models only
	streams sync.Pool // of *AnswerStream, released
}

// New builds the engine of cfg.
func New(cfg Config, opts Options) (*Engine, error) {
	return compile(&cfg, opts)
}

func compile(cfg *Config, opts Options) (*Engine, error) {
	e := new(Engine)
	seen := make(map[string]bool)
	for i := range cfg.Guards {
		gc := &cfg.Guards[i]
		if err := gc.validate(); err != nil {
			return nil, err
		}
		if seen[gc.Name] {
			return nil, fmt.Errorf("guard %s is defined twice", gc.Name)
		}
		seen[gc.Name] = true
		g, err := newGuard(gc, opts)
		if err != nil {
			return nil, err
		}
		g.index = len(e.guards)
		e.guards = append(e.guards, g)
		g.tally = new(Tally)
		if opts.Tally != nil {
			g.tally = opts.Tally(g.name)
		}
		e.byModel = e.byModel || g.models != nil
	}
	return e, nil
}

// Guards returns the names of the engine's guards, in order.
func (e *Engine) Guards() []string {
	names := make([]string, len(e.guards))
	for i, g := range e.guards {
		names[i] = g.name
	}
	return names
}

// ByModel reports whether a guard applies to some models only: a
// Scope's Models are read only then.
func (e *Engine) ByModel() bool { return e != nil && e.byModel }

// Applies reports whether any guard applies to bodies going dir for s:
// when none does, the host need not call the engine.
func (e *Engine) Applies(dir Direction, s *Scope) bool {
	if e == nil {
		return false
	}
	for _, g := range e.guards {
		if g.applies(dir, s) {
			return true
		}
	}
	return false
}

// MayApply reports whether a guard, in either direction, may apply to a
// call of one of models, whatever its key and account: a guard limited to
// some keys or accounts counts as one that may. It is for a caller that
// must decide before it knows the key, such as where a batch's lines run.
func (e *Engine) MayApply(models []string) bool {
	if e == nil {
		return false
	}
	for _, g := range e.guards {
		if g.mayApply(models) {
			return true
		}
	}
	return false
}

// Request applies the guards to a request body of api.
func (e *Engine) Request(ctx context.Context, api API, body []byte, s *Scope) *Result {
	r := new(Result)
	e.Check(ctx, r, api, Request, body, s)
	return r
}

// Answer applies the guards to a (non-streamed) answer body of api.
func (e *Engine) Answer(ctx context.Context, api API, body []byte, s *Scope) *Result {
	r := new(Result)
	e.Check(ctx, r, api, Response, body, s)
	return r
}

// Check applies the guards that apply to s going dir to body, a request
// or a (non-streamed) answer of api, and writes what they decided to r,
// all of which it overwrites: Request and Answer, for a host that keeps
// a Result for each call rather than have one made for each body. What r
// held before is gone, its Decisions included.
func (e *Engine) Check(ctx context.Context, r *Result, api API, dir Direction, body []byte, s *Scope) {
	// What the caller reads is set anew; the arrays the check fills are
	// written over as it fills them, not cleared first.
	r.Verdict, r.Direction, r.Body, r.Masked, r.Decisions, r.Stop, r.Err = Allowed, dir, body, false, nil, nil, nil
	if !e.Applies(dir, s) {
		return
	}
	texts, err := bodyTexts(api, dir, body, r.textBuf[:0])
	if err != nil {
		*r = Result{Verdict: Blocked, Direction: dir, Err: err}
		return
	}
	e.texts(ctx, r, api, texts, s)
}

// BatchLine applies the request guards to one line of a batch input file
// ({"custom_id", "method", "url", "body"}): the body, read as the API its
// url names. A masked line keeps every other byte. A url of no API the
// guards know has no texts.
func (e *Engine) BatchLine(ctx context.Context, line []byte, s *Scope) *Result {
	if !e.Applies(Request, s) {
		return &Result{Body: line}
	}
	var (
		path string
		body []byte
	)
	if !validObject(line) || !providers.Members(line, func(k, v []byte) bool {
		switch string(k) {
		case "url":
			p, ok := unquote(v)
			path = strings.Clone(p)
			return ok
		case "body":
			body = v
		}
		return true
	}) {
		return &Result{Verdict: Blocked, Body: nil, Err: ErrBadJSON}
	}
	api, known := APIForPath(path)
	if !known || body == nil {
		return &Result{Body: line}
	}
	if !validObject(body) {
		return &Result{Verdict: Blocked, Err: ErrBadJSON}
	}
	// body is a slice of line: its texts' offsets are offsets in line.
	r := &Result{Body: line}
	w := walker{body: line, texts: r.textBuf[:0]}
	w.request(api, body)
	if w.err != nil {
		return &Result{Verdict: Blocked, Err: w.err}
	}
	return e.texts(ctx, r, api, w.texts, s)
}

// texts applies the guards to the texts of r's body.
func (e *Engine) texts(ctx context.Context, r *Result, api API, texts []text, s *Scope) *Result {
	dir, body := r.Direction, r.Body
	vals := r.vals[:0]
	for _, t := range texts {
		vals = append(vals, t.s)
	}
	r.in = input{api: api, dir: dir, scope: s}
	r.Decisions, r.Stop = e.run(ctx, &r.in, vals, r.decs[:0])
	if r.Stop != nil {
		r.Verdict = Blocked
		if r.Stop.Action == Error {
			r.Verdict = Undecided
		}
		r.Body = nil
		return r
	}
	for i := range texts {
		if vals[i] != texts[i].s {
			r.Body, r.Masked = rewrite(body, texts, vals), true
			break
		}
	}
	return r
}

// input is what guards know of the texts they check, and the matches
// of the last text a local guard found matches in, reused for the next.
type input struct {
	api     API
	dir     Direction
	scope   *Scope
	matches []Match
}

// run applies each guard that applies to vals in turn, replacing masked
// texts in place, and appends their decisions to ds; it stops at the
// first that blocks or fails closed.
func (e *Engine) run(ctx context.Context, in *input, vals []string, ds []Decision) ([]Decision, *Decision) {
	for _, g := range e.guards {
		if !g.applies(in.dir, in.scope) {
			continue
		}
		d := g.check(ctx, in, vals)
		ds = append(ds, d)
		if !d.Allowed {
			return ds, &ds[len(ds)-1]
		}
	}
	return ds, nil
}

// errNoModerator is the error of a moderation guard without a Moderator.
var errNoModerator = errors.New("a moderation guard needs the host's Moderator")
