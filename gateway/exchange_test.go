package gateway

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/messages"
	"github.com/modelgate/modelgate/providers/openai"
	"github.com/modelgate/modelgate/providers/responses"
)

// TestUpstreamWriter drives the writer as reverse_proxy does: headers into
// Header(), WriteHeader, body in arbitrary pieces, flushes.
func TestUpstreamWriter(t *testing.T) {
	t.Run("error is buffered, client untouched", func(t *testing.T) {
		rec := httptest.NewRecorder()
		w := toClient(rec, &upstreamWriter{header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: true})
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"message":"slow down"}}`))
		_ = w.FlushError()
		if w.streaming || rec.Code != 200 || rec.Body.Len() != 0 || len(rec.Header()) != 0 {
			t.Fatalf("client saw something: %d %q %v", rec.Code, rec.Body, rec.Header())
		}
		if string(w.buf) != `{"error":{"message":"slow down"}}` || w.status != 429 {
			t.Fatalf("buffer %q status %d", w.buf, w.status)
		}
	})

	t.Run("1xx is ignored", func(t *testing.T) {
		w := toClient(httptest.NewRecorder(), &upstreamWriter{header: make(http.Header), framing: providers.SSE, api: openAIAPI})
		w.WriteHeader(http.StatusContinue)
		w.WriteHeader(http.StatusOK)
		if w.status != 200 {
			t.Fatalf("status %d", w.status)
		}
	})

	t.Run("stream translated event by event", func(t *testing.T) {
		rec := httptest.NewRecorder()
		tr := (&anthropic.Chat{}).ChatStream(providers.StreamOptions{})
		w := toClient(rec, &upstreamWriter{header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: true, tr: tr})
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Content-Length", "999")
		w.Header().Set("Request-Id", "req_1")
		w.Header().Set("Set-Cookie", "provider=cookie")
		w.WriteHeader(http.StatusOK)
		stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
		// Split mid-event: the first write must not emit a half event.
		cut := strings.Index(stream, "content_block_start\ndata") + 5
		_, _ = w.Write([]byte(stream[:cut]))
		if !strings.Contains(rec.Body.String(), `"role":"assistant"`) || strings.Contains(rec.Body.String(), `"Hi"`) {
			t.Fatalf("after the first piece: %q", rec.Body)
		}
		_, _ = w.Write([]byte(stream[cut:]))
		_ = w.FlushError()
		if !rec.Flushed || !strings.Contains(rec.Body.String(), `"content":"Hi"`) {
			t.Fatalf("after the second piece (flushed %v): %q", rec.Flushed, rec.Body)
		}
		h := rec.Header()
		if h.Get("Content-Type") != "text/event-stream" || h.Get("Content-Length") != "" || h.Get("X-Request-Id") != "req_1" || h.Get("Set-Cookie") != "" {
			t.Fatalf("client headers %v", h)
		}
		// The provider's stream ends without message_stop: an error event, no [DONE].
		w.finishStream(false)
		if body := rec.Body.String(); !strings.Contains(body, `"error"`) || strings.Contains(body, "[DONE]") {
			t.Fatalf("cut-off stream ended with %q", body)
		}
	})

	t.Run("passthrough stream stripped of usage, cut anywhere", func(t *testing.T) {
		// The gateway asked for usage and the client did not: the
		// "usage":null fields and the usage chunk are dropped however the
		// provider's writes cut them (the framing holds back a partial
		// event), and the usage is read.
		chunk := `data: {"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],"usage":null}` + "\n\n"
		stream := chunk + chunk + `data: {"id":"c","choices":[],"usage":{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17}}` + "\n\ndata: [DONE]\n\n"
		want := strings.Repeat(`data: {"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}`+"\n\n", 2) + "data: [DONE]\n\n"
		for cut := range len(stream) {
			rec := httptest.NewRecorder()
			tr := openai.NewRelay(false)
			w := toClient(rec, &upstreamWriter{header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: true, tr: tr})
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(stream[:cut]))
			_, _ = w.Write([]byte(stream[cut:]))
			w.finishStream(false)
			if rec.Body.String() != want || tr.Usage() != (Usage{Prompt: 14, Completion: 3, Known: true}) {
				t.Fatalf("cut at %d: %q, usage %+v", cut, rec.Body, tr.Usage())
			}
		}
	})

	t.Run("passthrough stream with usage, cut anywhere", func(t *testing.T) {
		// The client asked for usage: the stream reaches it byte for
		// byte, whether a write holds whole events (passed on as it is,
		// without a copy) or cuts one (framed), and the usage is read.
		chunk := `data: {"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],"usage":null}` + "\n\n"
		stream := ": keep-alive\n\n" + chunk + chunk + `data: {"id":"c","choices":[],"usage":{"prompt_tokens":14,"completion_tokens":3,"total_tokens":17}}` + "\n\ndata: [DONE]\n\n"
		for cut := range len(stream) {
			rec := httptest.NewRecorder()
			m := &Outcome{}
			tr := openai.NewRelay(true)
			w := toClient(rec, &upstreamWriter{header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: true, tr: tr, o: m})
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(stream[:cut]))
			if whole := strings.HasSuffix(stream[:cut], "\n\n") && !strings.Contains(stream[:cut], `"usage":{`); whole && len(w.out) > 0 {
				t.Fatalf("cut at %d: whole events without usage were copied", cut)
			}
			_, _ = w.Write([]byte(stream[cut:]))
			w.finishStream(false)
			if rec.Body.String() != stream || tr.Usage() != (Usage{Prompt: 14, Completion: 3, Known: true}) || m.FirstByte.IsZero() {
				t.Fatalf("cut at %d: %q, usage %+v, first byte %v", cut, rec.Body, tr.Usage(), m.FirstByte)
			}
		}
	})

	t.Run("passthrough stream aborted by the proxy", func(t *testing.T) {
		// Without a translator, and read by the meter as the dispatcher
		// always has it read, with and without stripping; a stream that
		// ended is not given the error.
		for _, tc := range []struct {
			name    string
			tr      providers.StreamTranslator
			aborted bool
		}{
			{"no translator", nil, true},
			{"a relay", openai.NewRelay(true), true},
			{"a relay, usage stripped", openai.NewRelay(false), true},
			{"a relay reading a stored Responses stream's id", responses.NewRelay(func(string) {}), true},
		} {
			rec := httptest.NewRecorder()
			w := toClient(rec, &upstreamWriter{header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: true, tr: tc.tr})
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: {\"choices\":[]}\n\n"))
			w.finishStream(tc.aborted)
			body := rec.Body.String()
			if !strings.HasPrefix(body, "data: {\"choices\":[]}\n\n") || strings.Contains(body, "upstream_aborted") != tc.aborted {
				t.Errorf("%s: body %q", tc.name, body)
			}
		}
		// The provider reset its connection after its last event: the
		// client has the whole answer, and no error after it.
		rec := httptest.NewRecorder()
		w := toClient(rec, &upstreamWriter{header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: true,
			tr: openai.NewRelay(true)})
		w.Header().Set("Content-Type", "text/event-stream")
		const whole = "data: {\"choices\":[]}\n\ndata: [DONE]\n\n"
		_, _ = w.Write([]byte(whole))
		w.finishStream(true)
		if body := rec.Body.String(); body != whole {
			t.Errorf("aborted after the end: body %q", body)
		}
	})

	t.Run("passthrough stream closed before its last event", func(t *testing.T) {
		// The provider closes its stream cleanly, between two events: the
		// client gets the API's error event unless the last event it got
		// ends the API's stream, however the provider's writes cut it.
		const chunk = `data: {"choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n\n"
		const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"}}\n\n"
		const delta = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n"
		const finish = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
		const nullFinish = `data: {"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":null}]}` + "\n\n"
		const usageChunk = `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}` + "\n\n"
		chat := func() providers.Relay { return openai.NewRelay(true) }
		responsesRelay := func() providers.Relay { return responses.NewRelay(nil) }
		storedResponsesRelay := func() providers.Relay { return responses.NewRelay(func(string) {}) }
		for _, tc := range []struct {
			name, stream string
			relay        func() providers.Relay
			wantError    string
		}{
			{"chat ended", chunk + "data: [DONE]\n\n", chat, ""},
			{"chat ended, a keep-alive after", chunk + "data: [DONE]\n\n: keep-alive\n\n", chat, ""},
			{"chat ended by an error", chunk + `data: {"error":{"message":"overloaded"}}` + "\n\n", chat, ""},
			{"chat cut", chunk + chunk, chat, `data: {"error":{"message":"the provider's stream ended before the answer was complete"`},
			{"chat cut, a keep-alive after", chunk + ": keep-alive\n\n", chat, `"code":"stream_incomplete"`},
			{"chat with a chunk after the end", chunk + "data: [DONE]\n\n" + chunk, chat, ""},
			{"chat ended, a stray line end", chunk + "data: [DONE]\n\n\n", chat, ""},
			{"chat ended, a stray line end and a keep-alive", chunk + "data: [DONE]\n\n\n: ping\n\n", chat, ""},
			{"chat ended, an id line", chunk + "data: [DONE]\nid: 9\n\n", chat, ""},
			{"chat ended, a retry event", chunk + "data: [DONE]\n\nretry: 3000\n\n", chat, ""},
			{"chat ended by a named error event", chunk + "event: error\ndata: {\"message\":\"overloaded\"}\n\n", chat, ""},
			// Some OpenAI-compatible servers never send [DONE]: the answer
			// is whole once a choice's finish_reason came.
			{"chat finished without [DONE]", chunk + finish + usageChunk, chat, ""},
			{"chat finished without [DONE], spaced JSON", chunk + `data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}` + "\n\n", chat, ""},
			{"chat cut, finish_reason null", chunk + nullFinish, chat, `"code":"stream_incomplete"`},
			{"chat cut after the usage chunk", chunk + usageChunk, chat, `"code":"stream_incomplete"`},
			{"messages ended", start + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", messages.NewRelay, ""},
			{"messages ended, a stray line end and a comment", start + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n\n: x\n\n", messages.NewRelay, ""},
			{"messages ended by an error", start + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"o\"}}\n\n", messages.NewRelay, ""},
			{"messages cut", start, messages.NewRelay, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\""},
			{"responses ended", delta + "event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n", responsesRelay, ""},
			{"responses ended, no event names", "data: {\"type\":\"response.incomplete\"}\n\n", responsesRelay, ""},
			{"responses cut", delta, responsesRelay, "event: error\ndata: {\"type\":\"error\",\"code\":\"stream_incomplete\""},
			{"responses cut, read by a relay", delta, storedResponsesRelay, `"code":"stream_incomplete"`},
			{"responses ended, read by a relay", delta + "event: response.failed\ndata: {\"type\":\"response.failed\"}\n\n", storedResponsesRelay, ""},
		} {
			for cut := range len(tc.stream) {
				rec := httptest.NewRecorder()
				w := toClient(rec, &upstreamWriter{header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: true, tr: tc.relay()})
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte(tc.stream[:cut]))
				_, _ = w.Write([]byte(tc.stream[cut:]))
				w.finishStream(false)
				// The stream's events, then what the gateway added (a write
				// cut inside a stray line end is framed, which drops it).
				body, ok := strings.CutPrefix(rec.Body.String(), strings.TrimRight(tc.stream, "\n"))
				body = strings.TrimLeft(body, "\n")
				if !ok || tc.wantError == "" && body != "" || tc.wantError != "" && (!strings.Contains(body, tc.wantError) || strings.Count(body, "\n\n") != 1) {
					t.Fatalf("%s, cut at %d: the client got %q after the stream, want %q", tc.name, cut, body, tc.wantError)
				}
			}
		}
	})

	t.Run("non-stream answer with a stream content type is buffered", func(t *testing.T) {
		rec := httptest.NewRecorder()
		w := toClient(rec, &upstreamWriter{header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: false})
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: x\n\n"))
		if w.streaming || rec.Body.Len() != 0 {
			t.Fatal("a non-stream request must never stream")
		}
	})
}

// TestFailureRetryAfter: a failure's retry hint reaches the client's
// headers, as the SDKs read them, and the outcome, as the batch runner
// reads it: what the provider's headers say, else its error's.
func TestFailureRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name         string
		header       http.Header
		after        time.Duration
		want, wantMs string
		retryAfter   time.Duration
	}{
		{"from the body", http.Header{}, 1500 * time.Millisecond, "2", "1500", 1500 * time.Millisecond},
		{"the provider's header wins", http.Header{"Retry-After": {"7"}}, time.Second, "7", "", 7 * time.Second},
		{"the provider's milliseconds first", http.Header{"Retry-After": {"7"}, "Retry-After-Ms": {"6500"}}, time.Second, "7", "6500", 6500 * time.Millisecond},
		{"none", http.Header{}, 0, "", "", 0},
	} {
		o := &Outcome{Header: make(http.Header)}
		f := &failure{err: &providers.Error{Status: 429, Type: "rate_limit_error", Message: "slow down", RetryAfter: tc.after}, header: tc.header}
		o.failWith(openAIAPI, f)
		if o.Status != 429 || o.Header.Get("Retry-After") != tc.want || o.Header.Get("Retry-After-Ms") != tc.wantMs ||
			o.RetryAfter != tc.retryAfter || !o.Retryable || o.Err != f.err {
			t.Errorf("%s: %d %v %+v", tc.name, o.Status, o.Header, o)
		}
	}
}

// lineFraming cuts a stream at each "\n" and cannot read a frame "BAD",
// as a binary framing cannot read one whose checksum is wrong.
type lineFraming struct{}

func (lineFraming) IsStream(string) bool { return true }

func (lineFraming) Cut(buf []byte) (event, rest []byte, ok bool, err error) {
	i := strings.IndexByte(string(buf), '\n')
	if i < 0 {
		return nil, buf, false, nil
	}
	if string(buf[:i]) == "BAD" {
		return nil, nil, false, errors.New("checksum mismatch")
	}
	return buf[:i], buf[i+1:], true, nil
}

// endingTranslator sends each event as a chunk and ends the stream at the
// event "END"; closed counts its Close calls.
type endingTranslator struct {
	ended  bool
	closed int
}

func (e *endingTranslator) Event(dst, ev []byte) ([]byte, error) {
	switch {
	case e.ended:
		return dst, nil
	case string(ev) == "END":
		e.ended = true
		return append(dst, "data: [DONE]\n\n"...), nil
	}
	return append(append(append(dst, "data: "...), ev...), "\n\n"...), nil
}

func (e *endingTranslator) Close(dst []byte) []byte {
	e.closed++
	if !e.ended {
		return append(dst, "data: {\"error\":{\"message\":\"cut off\"}}\n\n"...)
	}
	return dst
}

func (e *endingTranslator) Ended() bool { return e.ended }

func (e *endingTranslator) Usage() providers.Used { return providers.Used{} }

// notEnding is endingTranslator without providers.StreamEnder.
type notEnding struct{ e *endingTranslator }

func (n notEnding) Event(dst, ev []byte) ([]byte, error) { return n.e.Event(dst, ev) }
func (n notEnding) Close(dst []byte) []byte              { return n.e.Close(dst) }
func (n notEnding) Usage() providers.Used                { return providers.Used{} }

// TestUpstreamWriterAfterTheEnd: a frame the framing cannot read after the
// translator ended the client's stream is dropped with the rest (the stream
// ends in [DONE], and Close still runs); before the end, or with a
// translator that cannot tell, it ends the stream with an error event.
func TestUpstreamWriterAfterTheEnd(t *testing.T) {
	const done, bad = "data: [DONE]\n\n", `"code":"bad_upstream_event"`
	for _, tc := range []struct {
		name, upstream string
		ender          bool
		wantEnd        string // what the body ends with
		wantClosed     int
	}{
		{"bad frame after the end", "a\nEND\nBAD\nb\n", true, done, 1},
		{"bad frame after the end, in a later write", "a\nEND\n|BAD\nb\n", true, done, 1},
		{"bad frame before the end", "a\nBAD\nEND\n", true, bad, 0},
		{"translator that cannot tell", "a\nEND\nBAD\n", false, bad, 0},
		{"no bad frame", "a\nEND\nb\n", true, done, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			et := &endingTranslator{}
			var tr providers.StreamTranslator = et
			if !tc.ender {
				tr = notEnding{et}
			}
			w := toClient(rec, &upstreamWriter{header: make(http.Header), framing: lineFraming{}, api: openAIAPI, wantStream: true, tr: tr})
			w.WriteHeader(http.StatusOK)
			for _, piece := range strings.Split(tc.upstream, "|") {
				if n, err := w.Write([]byte(piece)); n != len(piece) || err != nil {
					t.Fatalf("Write: %d, %v", n, err)
				}
			}
			w.finishStream(false)
			body := rec.Body.String()
			if !strings.HasPrefix(body, "data: a\n\n") {
				t.Errorf("body %q does not start with the first event", body)
			}
			end := body
			if i := strings.LastIndex(body, "data: "); i >= 0 {
				end = body[i:]
			}
			if !strings.Contains(end, tc.wantEnd) || strings.Count(body, "data: ") != strings.Count(body[:len(body)-len(end)], "data: ")+1 {
				t.Errorf("body %q, want it to end with %q", body, tc.wantEnd)
			}
			if strings.Contains(body, "data: b") {
				t.Errorf("an event after the end reached the client: %q", body)
			}
			if tc.wantEnd == done && strings.Contains(body, `"error"`) {
				t.Errorf("an error event in a stream that ended: %q", body)
			}
			if et.closed != tc.wantClosed {
				t.Errorf("Close called %d times, want %d", et.closed, tc.wantClosed)
			}
		})
	}
}

// toClient makes w write to rec as the gateway writes to a client: rec's
// header map is the outcome's, and rec the stream's sink.
func toClient(rec *httptest.ResponseRecorder, w *upstreamWriter) *upstreamWriter {
	w.sink, w.client = recorderSink{rec}, rec.Header()
	if w.o == nil {
		w.o = &Outcome{}
	}
	return w
}

// recorderSink is a ResponseRecorder as a stream's sink.
type recorderSink struct{ rec *httptest.ResponseRecorder }

func (s recorderSink) WriteHeader(status int)      { s.rec.WriteHeader(status) }
func (s recorderSink) Write(p []byte) (int, error) { return s.rec.Write(p) }
func (s recorderSink) Flush() error                { s.rec.Flush(); return nil }
