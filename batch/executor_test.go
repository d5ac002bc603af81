package batch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
)

// fakeExecutor answers from scripts keyed by body.model:
//
//	ok          200 with a chat.completion (pretty-printed, as OpenAI's)
//	fail-400    400 with an OpenAI error body
//	flaky       429 (retry after 10ms) the first time a custom_id is seen, then 200
//	always-500  500
//	slow        waits delay (0: until ctx ends), then 200
//	unknown     refused by Check
type fakeExecutor struct {
	// delay is how long "slow" takes; 0 waits until ctx ends.
	delay time.Duration
	// gate, when set, holds every call until it is closed or ctx ends.
	gate chan struct{}
	// onCall, when set, is called as each call starts.
	onCall func(req Request)

	mu       sync.Mutex
	calls    map[string]int // Do calls per custom_id
	answered map[string]int // answers (status != 0) per custom_id
	checks   atomic.Int64
	dead     atomic.Bool // a crashed process's executor: answers nothing
}

func newFakeExecutor() *fakeExecutor {
	return &fakeExecutor{calls: make(map[string]int), answered: make(map[string]int)}
}

func (f *fakeExecutor) Check(endpoint string, body []byte, models []string) (Route, error) {
	f.checks.Add(1)
	m := gjson.GetBytes(body, "model")
	if m.Type != gjson.String || m.Str == "" {
		return Route{}, errors.New("body.model is required")
	}
	if m.Str == "unknown" {
		return Route{}, fmt.Errorf("the model %q does not exist", m.Str)
	}
	if len(models) > 0 && !slices.Contains(models, m.Str) {
		return Route{}, fmt.Errorf("the model %q is not allowed", m.Str)
	}
	// "<provider>/<model>" for a provider named nat…: a provider with a
	// batch API in the native tests (when Live.Native gives one).
	if prov, model, ok := strings.Cut(m.Str, "/"); ok && strings.HasPrefix(prov, "nat") {
		return Route{Model: m.Str, Provider: prov, Upstream: model}, nil
	}
	return Route{Model: m.Str, Provider: "fake"}, nil
}

const chatAnswer = `{
  "id": "chatcmpl-%s",
  "object": "chat.completion",
  "created": 1714508499,
  "model": "%s",
  "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "hi %s"}, "finish_reason": "stop"}
  ],
  "usage": {
    "prompt_tokens": 3,
    "completion_tokens": 5,
    "total_tokens": 8,
    "prompt_tokens_details": {"cached_tokens": 1},
    "completion_tokens_details": {"reasoning_tokens": 2}
  }
}
`

func (f *fakeExecutor) Do(ctx context.Context, req Request) Response {
	if f.dead.Load() {
		<-ctx.Done() // a dead process sends nothing upstream
		return Response{}
	}
	f.mu.Lock()
	f.calls[req.CustomID]++
	n := f.calls[req.CustomID]
	f.mu.Unlock()
	if f.onCall != nil {
		f.onCall(req)
		if f.dead.Load() { // onCall killed the process
			<-ctx.Done()
			return Response{}
		}
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return Response{}
		}
	}
	model := gjson.GetBytes(req.Body, "model").Str
	if prov, m, ok := strings.Cut(model, "/"); ok && strings.HasPrefix(prov, "nat") {
		model = m // a native provider's line run in the gateway
	}
	ok := Response{Status: 200, RequestID: "req_" + req.CustomID,
		Body: fmt.Appendf(nil, chatAnswer, req.CustomID, model, req.CustomID)}
	var resp Response
	switch model {
	case "ok":
		resp = ok
	case "fail-400":
		resp = Response{Status: 400, RequestID: "req_" + req.CustomID,
			Body: []byte(`{"error": {"message": "bad request", "type": "invalid_request_error", "param": null, "code": null}}`)}
	case "flaky":
		if n == 1 {
			resp = Response{Status: 429, RetryAfter: 10 * time.Millisecond,
				Body: []byte(`{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":null}}`)}
		} else {
			resp = ok
		}
	case "always-500":
		resp = Response{Status: 500, Body: []byte(`{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`)}
	case "slow":
		var wait <-chan time.Time
		if f.delay > 0 {
			t := time.NewTimer(f.delay)
			defer t.Stop()
			wait = t.C
		}
		select {
		case <-wait:
			resp = ok
		case <-ctx.Done():
			return Response{}
		}
	default:
		resp = Response{Status: 404, Body: []byte(`{"error":{"message":"no such model","type":"invalid_request_error","param":"model","code":"model_not_found"}}`)}
	}
	f.mu.Lock()
	f.answered[req.CustomID]++
	f.mu.Unlock()
	return resp
}

// callCounts returns a copy of the calls per custom_id.
func (f *fakeExecutor) callCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.calls)
}

// answeredIDs returns a copy of the answers per custom_id.
func (f *fakeExecutor) answeredIDs() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.answered)
}

func (f *fakeExecutor) totalCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, v := range f.calls {
		n += v
	}
	return n
}
