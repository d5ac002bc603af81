package routing

import "sync/atomic"

// budget is an alias's retry budget: over its window, the attempts after
// a request's first may be at most ratio × requests + floor, where the
// floor is MinPerSecond for each second of the window (as Finagle's and
// gRPC's retry budgets bound retries, and Envoy's a share of requests).
// Checking and counting a retry are two atomic steps: requests that retry
// at the very same moment may pass the budget by as many.
type budget struct {
	off       bool
	ratio     float64
	floor     float64
	w         *window // requests, retries
	exhausted atomic.Uint64
}

func newBudget(c BudgetConfig) *budget {
	return &budget{off: c.Off, ratio: c.Ratio, floor: c.MinPerSecond * c.Window.Seconds(),
		w: newWindow(int64(c.Window))}
}

// request counts a request.
func (b *budget) request(now int64) {
	if !b.off {
		b.w.add(now, 1, 0)
	}
}

// withdraw counts a retry if the budget allows one.
func (b *budget) withdraw(now int64) bool {
	if b.off {
		return true
	}
	requests, retries := b.w.sum(now)
	if float64(retries+1) > b.ratio*float64(requests)+b.floor {
		b.exhausted.Add(1)
		return false
	}
	b.w.add(now, 0, 1)
	return true
}

// BudgetHealth is the state of an alias's retry budget.
type BudgetHealth struct {
	// Requests and Retries are counted over the window.
	Requests int64 `json:"requests"`
	Retries  int64 `json:"retries"`
	// Allowed is how many retries the window allows now.
	Allowed float64 `json:"allowed"`
	// Exhausted counts the retries refused, since the alias was first
	// configured.
	Exhausted uint64 `json:"exhausted"`
	// Off is set when the budget is lifted.
	Off bool `json:"off,omitempty"`
}

func (b *budget) health(now int64) BudgetHealth {
	requests, retries := b.w.sum(now)
	return BudgetHealth{Requests: int64(requests), Retries: int64(retries),
		Allowed: b.ratio*float64(requests) + b.floor, Exhausted: b.exhausted.Load(), Off: b.off}
}
