package providerkit

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// broken is a chat translator with the faults each test sets; the zero
// value translates correctly, as an OpenAI-compatible provider would.
type broken struct {
	request  func(body []byte) (providers.Request, error)
	response func(body []byte) ([]byte, providers.Used, error)
	mapError func(status int, body []byte) *providers.Error
}

func (b broken) ChatRequest(body []byte, model string) (providers.Request, error) {
	if b.request != nil {
		return b.request(body)
	}
	return providers.Request{Path: "/chat", Body: body}, nil
}

func (b broken) ChatResponse(body []byte) ([]byte, providers.Used, error) {
	if b.response != nil {
		return b.response(body)
	}
	return body, providers.ReadAnswerUsage(body), nil
}

func (broken) ChatStream(providers.StreamOptions) providers.StreamTranslator { return nil }

func (b broken) Error(status int, _ http.Header, body []byte) *providers.Error {
	if b.mapError != nil {
		return b.mapError(status, body)
	}
	return providers.ErrorFromBody(status, body)
}

// TestCheckRequest shows CheckRequest failing a translator that writes
// into the client's body, makes invalid JSON, a path or query of the wrong
// form, or refuses a request without naming the parameter.
func TestCheckRequest(t *testing.T) {
	const body = `{"model":"m","messages":[{"role":"user","content":"Hi"}]}`
	for _, tt := range []struct {
		name    string
		c       broken
		refused bool
		fails   bool
	}{
		{"correct", broken{}, false, false},
		{"writes into the body", broken{request: func(b []byte) (providers.Request, error) {
			b[2] = 'M'
			return providers.Request{Path: "/chat", Body: b}, nil
		}}, false, true},
		{"invalid JSON", broken{request: func(b []byte) (providers.Request, error) {
			return providers.Request{Path: "/chat", Body: b[:10]}, nil
		}}, false, true},
		{"a path without /", broken{request: func(b []byte) (providers.Request, error) {
			return providers.Request{Path: "chat", Body: b}, nil
		}}, false, true},
		{"a query with ?", broken{request: func(b []byte) (providers.Request, error) {
			return providers.Request{Path: "/chat", Query: "?a=1", Body: b}, nil
		}}, false, true},
		{"an error", broken{request: func([]byte) (providers.Request, error) {
			return providers.Request{}, providers.Unsupported("messages", "toy")
		}}, false, true},
		{"refused as wanted", broken{request: func([]byte) (providers.Request, error) {
			return providers.Request{}, providers.Unsupported("tools", "toy")
		}}, true, false},
		{"refused without a param", broken{request: func([]byte) (providers.Request, error) {
			return providers.Request{}, &providers.Error{Status: 400, Type: "invalid_request_error", Message: "no"}
		}}, true, true},
		{"refused with a 500", broken{request: func([]byte) (providers.Request, error) {
			return providers.Request{}, &providers.Error{Status: 500, Type: "server_error", Param: "tools", Message: "no"}
		}}, true, true},
		{"not refused", broken{}, true, true},
	} {
		failed, log := Failures(t, func(tb testing.TB) { CheckRequest(tb, tt.c, body, "m", tt.refused) })
		if failed != tt.fails {
			t.Errorf("%s: failed %v, want %v\n%s", tt.name, failed, tt.fails, log)
		}
	}
}

const completion = `{"id":"c1","object":"chat.completion","created":1750000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}`

func TestCheckCompletion(t *testing.T) {
	for _, tt := range []struct {
		name, old, new string
		fails          bool
	}{
		{"correct", "", "", false},
		{"another object", `"chat.completion"`, `"chat.completion.chunk"`, true},
		{"no id", `"id":"c1"`, `"id":""`, true},
		{"no created", `"created":1750000000`, `"created":0`, true},
		{"no choices", `[{"index":0,"message":{"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":"stop"}]`, `[]`, true},
		{"another role", `"role":"assistant"`, `"role":"user"`, true},
		{"an unknown finish reason", `"finish_reason":"stop"`, `"finish_reason":"end_turn"`, true},
		{"not JSON", `}],`, `]],`, true},
	} {
		out := strings.Replace(completion, tt.old, tt.new, 1)
		if failed, log := Failures(t, func(tb testing.TB) { CheckCompletion(tb, []byte(out)) }); failed != tt.fails {
			t.Errorf("%s: failed %v, want %v\n%s", tt.name, failed, tt.fails, log)
		}
	}
}

func TestCheckUsage(t *testing.T) {
	want := Usage{Prompt: 5, Completion: 3, Total: 8, Cached: 2}
	for _, tt := range []struct {
		name, usage string
		fails       bool
	}{
		{"correct", `{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":2}}`, false},
		{"other counts", `{"prompt_tokens":6,"completion_tokens":3,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":2}}`, true},
		{"a string", `{"prompt_tokens":"5","completion_tokens":3,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":2}}`, true},
		{"a fraction", `{"prompt_tokens":5.0,"completion_tokens":3,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":2}}`, true},
		{"no total", `{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}`, true},
		{"a wrong total", `{"prompt_tokens":5,"completion_tokens":3,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":2}}`, true},
		{"more cached than the prompt", `{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4,"prompt_tokens_details":{"cached_tokens":2}}`, true},
		{"null", `null`, true},
	} {
		if failed, log := Failures(t, func(tb testing.TB) { CheckUsage(tb, tt.usage, want) }); failed != tt.fails {
			t.Errorf("%s: failed %v, want %v\n%s", tt.name, failed, tt.fails, log)
		}
	}
}

func TestCheckError(t *testing.T) {
	const page = "<html><body><p>secret-internal-host</p></body></html>"
	for _, tt := range []struct {
		name  string
		c     broken
		fails bool
	}{
		{"correct", broken{}, false},
		{"nil", broken{mapError: func(int, []byte) *providers.Error { return nil }}, true},
		{"a 200", broken{mapError: func(int, []byte) *providers.Error {
			return &providers.Error{Status: 200, Type: "server_error", Message: "m"}
		}}, true},
		{"no message", broken{mapError: func(s int, _ []byte) *providers.Error {
			return &providers.Error{Status: s, Type: "server_error"}
		}}, true},
		{"the page copied", broken{mapError: func(s int, b []byte) *providers.Error {
			return &providers.Error{Status: s, Type: "server_error", Message: "upstream said: " + string(b)}
		}}, true},
	} {
		if failed, log := Failures(t, func(tb testing.TB) { _ = CheckError(tb, tt.c, 502, nil, []byte(page)) }); failed != tt.fails {
			t.Errorf("%s: failed %v, want %v\n%s", tt.name, failed, tt.fails, log)
		}
	}
}

// TestCheckAnswerUsage shows CheckAnswerUsage failing a ChatResponse that
// returns other usage than its answer carries, or none.
func TestCheckAnswerUsage(t *testing.T) {
	carried := providers.ReadAnswerUsage([]byte(completion))
	for _, tt := range []struct {
		name  string
		used  providers.Used
		fails bool
	}{
		{"correct", carried, false},
		{"none", providers.Used{}, true},
		{"other counts", providers.Used{Prompt: 3, Completion: 1, Known: true}, true},
		{"not known", providers.Used{Prompt: 2, Completion: 1}, true},
	} {
		c := broken{response: func(b []byte) ([]byte, providers.Used, error) { return b, tt.used, nil }}
		failed, log := Failures(t, func(tb testing.TB) {
			out, used, _ := c.ChatResponse([]byte(completion))
			CheckAnswerUsage(tb, out, used)
		})
		if failed != tt.fails {
			t.Errorf("%s: failed %v, want %v\n%s", tt.name, failed, tt.fails, log)
		}
	}
}

// counting is a stream translator that passes unified chunks on and
// reports the usage it read in them, or what report makes of it.
type counting struct {
	opts   providers.StreamOptions
	used   providers.Used
	report func(opts providers.StreamOptions, used providers.Used) providers.Used
}

func (c *counting) Event(dst, event []byte) ([]byte, error) {
	if data, ok := strings.CutPrefix(string(event), "data: "); ok && strings.Contains(data, `"usage":{`) {
		c.used = providers.ReadUsage(gjson.Get(data, "usage"))
	}
	return append(append(dst, event...), "\n\n"...), nil
}

func (c *counting) Close(dst []byte) []byte { return dst }

func (c *counting) Usage() providers.Used {
	if c.report != nil {
		return c.report(c.opts, c.used)
	}
	return c.used
}

// TestCheckStreamUsage shows CheckStreamUsage failing a stream translator
// that reports no usage, other usage than its stream carries, or usage
// only when the client asked for it.
func TestCheckStreamUsage(t *testing.T) {
	for _, tt := range []struct {
		name   string
		report func(providers.StreamOptions, providers.Used) providers.Used
		fails  bool
	}{
		{"correct", nil, false},
		{"none", func(providers.StreamOptions, providers.Used) providers.Used { return providers.Used{} }, true},
		{"other counts", func(_ providers.StreamOptions, u providers.Used) providers.Used { u.Prompt++; return u }, true},
		{"only with include_usage", func(o providers.StreamOptions, u providers.Used) providers.Used {
			if !o.IncludeUsage {
				return providers.Used{}
			}
			return u
		}, true},
	} {
		newStream := func(opts providers.StreamOptions) providers.StreamTranslator {
			return &counting{opts: opts, report: tt.report}
		}
		var got providers.Used
		failed, log := Failures(t, func(tb testing.TB) {
			got = CheckStreamUsage(tb, newStream, nil, providers.StreamOptions{}, []byte(chunk1+chunk2+usage+done))
		})
		if failed != tt.fails {
			t.Errorf("%s: failed %v, want %v\n%s", tt.name, failed, tt.fails, log)
		}
		if want := (providers.Used{Prompt: 2, Completion: 1, Known: true}); got != want {
			t.Errorf("%s: CheckStreamUsage returned %+v, want %+v", tt.name, got, want)
		}
	}
}
