package keyadmin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/quota"
	"github.com/modelgate/modelgate/usage"
)

// usageSource is where the API reads usage, limits and budgets: the
// modelgate app (*caddygateway.App).
type usageSource interface {
	// Usage sums the usage records over a query.
	Usage(ctx context.Context, q usage.Query) (usage.Report, error)
	// KeyStatus tells where a managed key and its owner stand now
	// against their limits and budgets.
	KeyStatus(ctx context.Context, k keys.Key) (quota.Status, error)
	// EffectivePolicy is the policy that applies to a managed key and to
	// its owner: its own where it has one, else the configured one.
	EffectivePolicy(k keys.Key) (key, owner keys.Policy)
	// ListAccountFiles and ListAccountBatches page through what an
	// account owns.
	ListAccountFiles(ctx context.Context, account string, opt batch.ListOptions) (batch.Page[batch.File], error)
	ListAccountBatches(ctx context.Context, account string, opt batch.ListOptions) (batch.Page[batch.Batch], error)
}

// usageParams is a GET usage request, read from its query string.
type usageParams struct {
	// from and to are the first and the last UTC day of the range, both
	// included.
	from, to usage.Day
	by       []usage.Dimension
	keyID    string
	owner    string
	keepKey  func(keyID string) bool
}

// paramError is a refused query parameter: a 400 that names it.
func paramError(param string, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: http.StatusBadRequest,
		Err: fmt.Errorf("invalid query parameter %s: %s", param, fmt.Sprintf(format, args...))}
}

// singleParams checks that q holds only the parameters allowed, each at
// most once, so that a typo (groupby=) is refused rather than ignored.
func singleParams(q url.Values, allowed ...string) error {
	for name, vs := range q {
		if !slices.Contains(allowed, name) {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest,
				Err: fmt.Errorf("unknown query parameter %q: use %s", name, strings.Join(allowed, ", "))}
		}
		if len(vs) > 1 {
			return paramError(name, "given %d times", len(vs))
		}
	}
	return nil
}

// parseUsageParams reads the query of GET usage: from and to (UTC days,
// 2026-07-24, both included; default: the first of the current month to
// today), group_by (comma-separated key, owner, model, provider, day;
// default: none, one row), key_id and owner (keep only that key's or
// owner's usage).
func parseUsageParams(q url.Values, now time.Time) (usageParams, error) {
	if err := singleParams(q, "from", "to", "group_by", "key_id", "owner"); err != nil {
		return usageParams{}, err
	}
	today := usage.DayOf(now)
	y, m, _ := now.UTC().Date()
	p := usageParams{from: usage.DayOf(time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)), to: today,
		keyID: q.Get("key_id"), owner: q.Get("owner")}
	var err error
	if s := q.Get("from"); s != "" {
		if p.from, err = usage.ParseDay(s); err != nil {
			return usageParams{}, paramError("from", "%v (a UTC day)", err)
		}
	}
	if s := q.Get("to"); s != "" {
		if p.to, err = usage.ParseDay(s); err != nil {
			return usageParams{}, paramError("to", "%v (a UTC day, included)", err)
		}
	}
	if p.from > p.to {
		return usageParams{}, paramError("to", "%s is before from %s", p.to, p.from)
	}
	by, err := usage.ParseDimensions(q.Get("group_by"))
	if err != nil {
		return usageParams{}, paramError("group_by", "%v", err)
	}
	for _, d := range by {
		if !slices.Contains(p.by, d) {
			p.by = append(p.by, d)
		}
	}
	return p, nil
}

// query is the usage.Query of p.
func (p usageParams) query() usage.Query {
	return usage.Query{From: p.from.Time(), To: (p.to + 1).Time(), By: p.by, KeyID: p.keyID, Owner: p.owner, KeepKey: p.keepKey}
}

// usageCounts are usage.Counts as the API writes them: cost as an exact
// decimal string of dollars, never a float, with the requests it leaves
// out beside it.
type usageCounts struct {
	Requests         int64 `json:"requests"`
	InputTokens      int64 `json:"input_tokens"`
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
	Searches         int64 `json:"rerank_searches"`
	EmbeddingTokens  int64 `json:"embedding_tokens"`
	// CacheHits are the requests answered from the response cache.
	CacheHits int64 `json:"cache_hits"`
	// CostUSD is what the priced requests cost, in dollars ("0.001234").
	CostUSD string `json:"cost_usd"`
	// Unpriced counts the requests of models without a price: their cost
	// is not in CostUSD, which is then a lower bound.
	Unpriced int64 `json:"unpriced_requests"`
}

func countsOf(c usage.Counts) usageCounts {
	return usageCounts{Requests: c.Requests, InputTokens: c.InputTokens, CachedTokens: c.CachedTokens,
		CacheWriteTokens: c.CacheWriteTokens, OutputTokens: c.OutputTokens, ReasoningTokens: c.ReasoningTokens,
		Searches: c.Searches, EmbeddingTokens: c.EmbeddingTokens, CacheHits: c.CacheHits, CostUSD: c.Cost.String(), Unpriced: c.Unpriced}
}

// usageRow is one group of a report: the values of the dimensions grouped
// by (the others are left out), then its counts.
type usageRow struct {
	KeyID        *string `json:"key_id,omitempty"`
	KeyName      *string `json:"key_name,omitempty"`
	Owner        *string `json:"owner,omitempty"`
	Model        *string `json:"model,omitempty"`
	Provider     *string `json:"provider,omitempty"`
	ProviderType *string `json:"provider_type,omitempty"`
	Day          *string `json:"day,omitempty"`
	usageCounts
}

// usageReport is the answer of GET usage.
type usageReport struct {
	From    string            `json:"from"`
	To      string            `json:"to"`
	GroupBy []usage.Dimension `json:"group_by"`
	Rows    []usageRow        `json:"rows"`
	Total   usageCounts       `json:"total"`
	// Incomplete names the usage records of the range that could not be
	// read: their usage is missing from the report.
	Incomplete []string `json:"incomplete,omitempty"`
}

// reportOf writes rep, the answer to p, as the API does.
func reportOf(p usageParams, rep usage.Report) usageReport {
	out := usageReport{From: p.from.String(), To: p.to.String(), GroupBy: p.by, Rows: make([]usageRow, 0, len(rep.Rows)),
		Total: countsOf(rep.Total), Incomplete: rep.Unreadable}
	if out.GroupBy == nil {
		out.GroupBy = []usage.Dimension{}
	}
	for _, r := range rep.Rows {
		row := usageRow{usageCounts: countsOf(r.Counts)}
		for _, d := range p.by {
			switch d {
			case usage.ByKey:
				row.KeyID, row.KeyName = &r.KeyID, &r.KeyName
			case usage.ByOwner:
				row.Owner = &r.Owner
			case usage.ByModel:
				row.Model = &r.Model
			case usage.ByProvider:
				row.Provider, row.ProviderType = &r.Provider, &r.ProviderType
			case usage.ByDay:
				day := r.Day.String()
				row.Day = &day
			}
		}
		out.Rows = append(out.Rows, row)
	}
	return out
}

// usage answers GET usage: the usage records summed over a range of days,
// grouped as the query says.
func (a keyAPI) usage(w http.ResponseWriter, r *http.Request) error {
	if err := onlyGET(w, r); err != nil {
		return err
	}
	p, err := parseUsageParams(r.URL.Query(), a.clock())
	if err != nil {
		return err
	}
	if err := a.scopeUsage(r.Context(), &p); err != nil {
		return err
	}
	rep, err := a.app.Usage(r.Context(), p.query())
	if err != nil {
		return a.usageError(err)
	}
	return respond(w, http.StatusOK, reportOf(p, rep))
}

// scopeUsage keeps an account holder's usage query to its account: the
// account's managed keys (a member's: the keys it created). Another
// account, or a key it does not see, is 404.
func (a keyAPI) scopeUsage(ctx context.Context, p *usageParams) error {
	if a.actor.Is(accounts.ActorOperator) {
		return nil
	}
	if p.owner != "" && p.owner != a.actor.Account {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no account %q", p.owner)}
	}
	p.owner = a.actor.Account
	if p.keyID != "" {
		if _, err := a.svc.GetKey(ctx, a.actor, p.keyID); err != nil {
			return a.fail(err, "key", p.keyID)
		}
	}
	if a.actor.SeesAllKeys() {
		// A static key named as the account counts under its name too:
		// it is not the account's.
		p.keepKey = func(id string) bool { return !strings.HasPrefix(id, "static:") }
		return nil
	}
	ks, err := a.svc.ListKeys(ctx, a.actor, "")
	if err != nil {
		return a.fail(err, "key", "")
	}
	own := make(map[string]bool, len(ks))
	for _, k := range ks {
		own[k.ID] = true
	}
	p.keepKey = func(id string) bool { return own[id] }
	return nil
}

func (a keyAPI) usageError(err error) error {
	a.logger.Error("reading the usage records", zap.Error(err))
	return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: errors.New("the usage records could not be read from the storage")}
}

// defaultChartDays and maxChartDays bound GET keys/{id}/usage?days=.
const (
	defaultChartDays = 30
	maxChartDays     = 366
)

// keyUsage is the answer of GET keys/{id}/usage: a managed key, its usage
// on each of the last days (every day, zeros included), the policy that
// applies to it and its owner, and where they stand now.
type keyUsage struct {
	Key  keys.Key `json:"key"`
	From string   `json:"from"`
	To   string   `json:"to"`
	// Days holds one entry per UTC day from From to To.
	Days  []dayUsage  `json:"days"`
	Total usageCounts `json:"total"`
	// Policy is what applies: the key's own limits and budget where it
	// has them (Key.Limits, Key.Budget), else the configured defaults.
	Policy struct {
		Key   keys.Policy  `json:"key"`
		Owner *keys.Policy `json:"owner,omitempty"`
	} `json:"policy"`
	// Status is where the key and its owner stand now; StatusError says
	// why it is missing (the shared state cannot be reached).
	Status      *statusView `json:"status,omitempty"`
	StatusError string      `json:"status_error,omitempty"`
	Incomplete  []string    `json:"incomplete,omitempty"`
}

type dayUsage struct {
	Day string `json:"day"`
	usageCounts
}

// statusView is a quota.Status as the API writes it.
type statusView struct {
	Key   subjectView  `json:"key"`
	Owner *subjectView `json:"owner,omitempty"`
}

// subjectView is where a key or an owner stands: each limit and budget
// it has, none of those it has not.
type subjectView struct {
	Requests *rateView   `json:"requests_per_minute,omitempty"`
	Tokens   *rateView   `json:"tokens_per_minute,omitempty"`
	Budget   *budgetView `json:"budget,omitempty"`
}

type rateView struct {
	Limit     int64 `json:"limit"`
	Remaining int64 `json:"remaining"`
	// ResetMS is how long until what counts now has drained.
	ResetMS int64 `json:"reset_ms"`
}

type budgetView struct {
	USD         string `json:"usd"`
	Period      string `json:"period"`
	SpentUSD    string `json:"spent_usd"`
	ReservedUSD string `json:"reserved_usd"`
	LeftUSD     string `json:"left_usd"`
	// ResetsAt is when the period ends (unix seconds); null for a total
	// budget.
	ResetsAt *int64 `json:"resets_at"`
}

func subjectOf(s quota.SubjectStatus) subjectView {
	var v subjectView
	rate := func(l quota.RateLimit) *rateView {
		if l.Limit <= 0 {
			return nil
		}
		return &rateView{Limit: l.Limit, Remaining: l.Remaining, ResetMS: l.Reset.Milliseconds()}
	}
	v.Requests, v.Tokens = rate(s.Requests), rate(s.Tokens)
	if b := s.Budget; b.Amount > 0 {
		v.Budget = &budgetView{USD: b.Amount.String(), Period: string(b.Period), SpentUSD: b.Spent.String(),
			ReservedUSD: b.Reserved.String(), LeftUSD: b.Left.String()}
		if !b.Resets.IsZero() {
			at := b.Resets.Unix()
			v.Budget.ResetsAt = &at
		}
	}
	return v
}

// keyUsage answers GET keys/{id}/usage?days=30.
func (a keyAPI) keyUsage(w http.ResponseWriter, r *http.Request, id string) error {
	// A key the actor does not see is 404 whatever the method.
	k, err := a.svc.GetKey(r.Context(), a.actor, id)
	if err != nil {
		return a.fail(err, "key", id)
	}
	if err := onlyGET(w, r); err != nil {
		return err
	}
	q := r.URL.Query()
	if err := singleParams(q, "days"); err != nil {
		return err
	}
	n := defaultChartDays
	if s := q.Get("days"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > maxChartDays {
			return paramError("days", "%q is not a number of days from 1 to %d", s, maxChartDays)
		}
		n = v
	}
	to := usage.DayOf(a.clock())
	p := usageParams{from: to - usage.Day(n-1), to: to, by: []usage.Dimension{usage.ByDay}, keyID: k.ID}
	rep, err := a.app.Usage(r.Context(), p.query())
	if err != nil {
		return a.usageError(err)
	}
	out := keyUsage{Key: k, From: p.from.String(), To: p.to.String(), Days: make([]dayUsage, 0, n),
		Total: countsOf(rep.Total), Incomplete: rep.Unreadable}
	byDay := make(map[usage.Day]usage.Counts, len(rep.Rows))
	for _, row := range rep.Rows {
		byDay[row.Day] = row.Counts
	}
	for d := p.from; d <= p.to; d++ {
		out.Days = append(out.Days, dayUsage{Day: d.String(), usageCounts: countsOf(byDay[d])})
	}
	kp, op := a.app.EffectivePolicy(k)
	out.Policy.Key = kp
	if k.Owner != "" {
		out.Policy.Owner = &op
	}
	st, err := a.app.KeyStatus(r.Context(), k)
	if err != nil {
		a.logger.Warn("reading where a key stands against its limits", zap.String("key_id", k.ID), zap.Error(err))
		out.StatusError = "where the key stands against its limits and budgets could not be read now (the gateway's log says why)"
	} else {
		out.Status = &statusView{Key: subjectOf(st.Key)}
		if k.Owner != "" {
			o := subjectOf(st.Owner)
			out.Status.Owner = &o
		}
	}
	return respond(w, http.StatusOK, out)
}
