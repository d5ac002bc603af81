package providerkit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

const (
	chunk1 = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
	chunk2 = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n"
	usage  = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}` + "\n\n"
	done   = "data: [DONE]\n\n"
	answer = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}`
)

func TestValidUnifiedStream(t *testing.T) {
	for _, tt := range []struct{ name, stream, want string }{
		{"complete", chunk1 + chunk2 + done, ""},
		{"an error last", chunk1 + `data: {"error":{"message":"m"}}` + "\n\n", ""},
		{"empty", "", "the stream is empty"},
		{"no end", chunk1, "the stream ends without [DONE] or an error"},
		{"after [DONE]", done + chunk1, "events follow [DONE]"},
		{"after an error", `data: {"error":{}}` + "\n\n" + done, "events follow an error"},
		{"not JSON", "data: {\n\n" + done, "invalid JSON"},
		{"two lines", "data: {}\ndata: {}\n\n" + done, "event spans lines"},
		{"no data field", "event: x\n\n" + done, "malformed event"},
		{"a misused writer", chunk1 + `data: {"error":{"message":"m","type":"server_error","param":null,"code":"internal_error"}}` + "\n\n", "the translator misused the JSON writer"},
	} {
		if got := ValidUnifiedStream([]byte(tt.stream)); !strings.HasPrefix(got, tt.want) || (tt.want == "") != (got == "") {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestCheckUnifiedStream(t *testing.T) {
	with := providers.StreamOptions{IncludeUsage: true}
	for _, tt := range []struct {
		name, stream string
		opts         providers.StreamOptions
		fails        bool
	}{
		{"usage asked for", chunk1 + chunk2 + usage + done, with, false},
		{"usage not asked for", strings.ReplaceAll(chunk1+chunk2, `,"usage":null`, "") + done, providers.StreamOptions{}, false},
		{"usage unasked", chunk1 + chunk2 + done, providers.StreamOptions{}, true},
		{"usage missing in a chunk", strings.Replace(chunk1, `,"usage":null`, "", 1) + chunk2 + usage + done, with, true},
		{"usage beside choices", chunk1 + strings.Replace(chunk2, `"usage":null`, `"usage":{"total_tokens":3}`, 1) + done, with, true},
		{"two ids", chunk1 + strings.Replace(chunk2, `"id":"c"`, `"id":"d"`, 1) + usage + done, with, true},
		{"not a stream", "data: x", with, true},
	} {
		if failed, log := Failures(t, func(tb testing.TB) { CheckUnifiedStream(tb, []byte(tt.stream), tt.opts) }); failed != tt.fails {
			t.Errorf("%s: failed %v, want %v\n%s", tt.name, failed, tt.fails, log)
		}
	}
}

func TestStreamMatchesAnswer(t *testing.T) {
	with := providers.StreamOptions{IncludeUsage: true}
	for _, tt := range []struct {
		name, stream, answer string
		opts                 providers.StreamOptions
		fails                bool
	}{
		{"the same", chunk1 + chunk2 + usage + done, answer, with, false},
		{"the same, no usage asked for", chunk1 + chunk2 + done, answer, providers.StreamOptions{}, false},
		{"other content", strings.Replace(chunk1, `"Hi"`, `"Ho"`, 1) + chunk2 + usage + done, answer, with, true},
		{"other finish", chunk1 + strings.Replace(chunk2, `"stop"`, `"length"`, 1) + usage + done, answer, with, true},
		{"other usage", chunk1 + chunk2 + strings.Replace(usage, `"prompt_tokens":2`, `"prompt_tokens":5`, 1) + done, answer, with, true},
		{"usage unasked", chunk1 + chunk2 + usage + done, answer, providers.StreamOptions{}, true},
		{"reasoning only streamed", strings.Replace(chunk1, `"content":"Hi"`, `"content":"Hi","reasoning_content":"r"`, 1) + chunk2 + usage + done, answer, with, true},
		{"no [DONE]", chunk1 + chunk2 + usage, answer, with, true},
		{"an error", chunk1 + `data: {"error":{"message":"m"}}` + "\n\n", answer, with, true},
	} {
		failed, log := Failures(t, func(tb testing.TB) { StreamMatchesAnswer(tb, []byte(tt.stream), []byte(tt.answer), tt.opts) })
		if failed != tt.fails {
			t.Errorf("%s: failed %v, want %v\n%s", tt.name, failed, tt.fails, log)
		}
	}
}

// echo is a stream translator that writes each event's data back as one
// unified event and ends with [DONE].
type echo struct{}

func (echo) Event(dst, event []byte) ([]byte, error) {
	if len(event) == 0 {
		return dst, nil
	}
	return append(append(append(dst, "data: "...), strings.TrimPrefix(string(event), "data: ")...), "\n\n"...), nil
}

func (echo) Close(dst []byte) []byte { return append(dst, done...) }

func (echo) Usage() providers.Used { return providers.Used{} }

func TestTranslate(t *testing.T) {
	upstream := []byte("data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\ndata: {\"c\":3}\r\r")
	want := "data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: {\"c\":3}\n\n" + done
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		r := rng
		if i == 0 {
			r = nil // all at once
		}
		got, err := Translate(echo{}, nil, upstream, r)
		if err != nil || string(got) != want {
			t.Fatalf("Translate = %q, %v; want %q", got, err, want)
		}
	}
}

// TestCheckFuzzedBody checks that the fuzzers' check fails on invalid
// JSON and on a misuse of the writer, and passes other errors.
func TestCheckFuzzedBody(t *testing.T) {
	w := jsonw.New(nil)
	w.Object() // left open
	_, misuse := w.Finish()
	for _, tt := range []struct {
		name  string
		out   string
		err   error
		fails bool
	}{
		{"valid", `{"a":1}`, nil, false},
		{"invalid", `{"a":1`, nil, true},
		{"refused", ``, errors.New("not an answer"), false},
		{"a misused writer", ``, fmt.Errorf("writing: %w", misuse), true},
	} {
		if failed, _ := Failures(t, func(tb testing.TB) { CheckFuzzedBody(tb, []byte("in"), []byte(tt.out), tt.err) }); failed != tt.fails {
			t.Errorf("%s: failed %v, want %v", tt.name, failed, tt.fails)
		}
	}
}

// refusing is a translator that refuses every request with err.
type refusing struct {
	providers.Chat
	err error
}

func (c refusing) ChatRequest([]byte, string) (providers.Request, error) {
	return providers.Request{}, c.err
}

func TestChatRequestError(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"Hi"}],"n":2}`
	want := &providers.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unsupported_parameter", Param: "n", Message: "no"}
	for _, tt := range []struct {
		name  string
		err   error
		fails bool
	}{
		{"the error wanted", want, false},
		{"no error", nil, true},
		{"another param", &providers.Error{Status: 400, Type: "invalid_request_error", Code: "unsupported_parameter", Param: "m", Message: "no"}, true},
		{"another code", &providers.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "n", Message: "no"}, true},
		{"no message", &providers.Error{Status: 400, Type: "invalid_request_error", Code: "unsupported_parameter", Param: "n"}, true},
		{"a 500", &providers.Error{Status: 500, Type: "server_error", Code: "unsupported_parameter", Param: "n", Message: "no"}, true},
		{"not a providers.Error", fmt.Errorf("n"), true},
	} {
		failed, _ := Failures(t, func(tb testing.TB) {
			ChatRequestError(tb, refusing{err: tt.err}, body, "m", "n", "unsupported_parameter")
		})
		if failed != tt.fails {
			t.Errorf("%s: failed %v, want %v", tt.name, failed, tt.fails)
		}
	}
}
