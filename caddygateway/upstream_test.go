package caddygateway

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
)

// TestUpstreamWriter drives the writer as reverse_proxy does: headers into
// Header(), WriteHeader, body in arbitrary pieces, flushes.
func TestUpstreamWriter(t *testing.T) {
	t.Run("error is buffered, client untouched", func(t *testing.T) {
		rec := httptest.NewRecorder()
		w := &upstreamWriter{client: rec, header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: true}
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
		w := &upstreamWriter{client: httptest.NewRecorder(), header: make(http.Header), framing: providers.SSE, api: openAIAPI}
		w.WriteHeader(http.StatusContinue)
		w.WriteHeader(http.StatusOK)
		if w.status != 200 {
			t.Fatalf("status %d", w.status)
		}
	})

	t.Run("stream translated event by event", func(t *testing.T) {
		rec := httptest.NewRecorder()
		tr := (&anthropic.Chat{}).ChatStream(providers.StreamOptions{})
		w := &upstreamWriter{client: rec, header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: true, tr: tr}
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
			m := &meter{}
			w := &upstreamWriter{client: rec, header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: true,
				tr: &tapStream{m: m, parse: chatUsage.event, strip: true}}
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(stream[:cut]))
			_, _ = w.Write([]byte(stream[cut:]))
			w.finishStream(false)
			if rec.Body.String() != want || m.usage != (usageInfo{Prompt: 14, Completion: 3, Known: true}) {
				t.Fatalf("cut at %d: %q, usage %+v", cut, rec.Body, m.usage)
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
			m := &meter{}
			w := &upstreamWriter{client: rec, header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: true,
				tr: &tapStream{m: m, parse: chatUsage.event}}
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(stream[:cut]))
			if whole := strings.HasSuffix(stream[:cut], "\n\n") && !strings.Contains(stream[:cut], `"usage":{`); whole && len(w.out) > 0 {
				t.Fatalf("cut at %d: whole events without usage were copied", cut)
			}
			_, _ = w.Write([]byte(stream[cut:]))
			w.finishStream(false)
			if rec.Body.String() != stream || m.usage != (usageInfo{Prompt: 14, Completion: 3, Known: true}) || m.firstByte.IsZero() {
				t.Fatalf("cut at %d: %q, usage %+v, first byte %v", cut, rec.Body, m.usage, m.firstByte)
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
			{"read by the meter", &tapStream{m: &meter{}, parse: chatUsage.event}, true},
			{"read by the meter, usage stripped", &tapStream{m: &meter{}, parse: chatUsage.event, strip: true}, true},
			{"read by the meter, not aborted", &tapStream{m: &meter{}, parse: chatUsage.event}, false},
			{"read by a relay (a stored Responses stream)", &tapStream{inner: &pointerTap{onID: func(string) {}}, m: &meter{}}, true},
		} {
			rec := httptest.NewRecorder()
			w := &upstreamWriter{client: rec, header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: true, tr: tc.tr}
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
		w := &upstreamWriter{client: rec, header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: true,
			tr: &tapStream{m: &meter{}, parse: chatUsage.event, ends: openAIAPI.ends}}
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
		for _, tc := range []struct {
			name, stream string
			api          *api
			relay        bool // read by a relay (pointerTap), as a stored Responses stream is
			wantError    string
		}{
			{"chat ended", chunk + "data: [DONE]\n\n", openAIAPI, false, ""},
			{"chat ended, a keep-alive after", chunk + "data: [DONE]\n\n: keep-alive\n\n", openAIAPI, false, ""},
			{"chat ended by an error", chunk + `data: {"error":{"message":"overloaded"}}` + "\n\n", openAIAPI, false, ""},
			{"chat cut", chunk + chunk, openAIAPI, false, `data: {"error":{"message":"the provider's stream ended before the answer was complete"`},
			{"chat cut, a keep-alive after", chunk + ": keep-alive\n\n", openAIAPI, false, `"code":"stream_incomplete"`},
			{"chat with a chunk after the end", chunk + "data: [DONE]\n\n" + chunk, openAIAPI, false, ""},
			{"chat ended, a stray line end", chunk + "data: [DONE]\n\n\n", openAIAPI, false, ""},
			{"chat ended, a stray line end and a keep-alive", chunk + "data: [DONE]\n\n\n: ping\n\n", openAIAPI, false, ""},
			{"chat ended, an id line", chunk + "data: [DONE]\nid: 9\n\n", openAIAPI, false, ""},
			{"chat ended, a retry event", chunk + "data: [DONE]\n\nretry: 3000\n\n", openAIAPI, false, ""},
			{"chat ended by a named error event", chunk + "event: error\ndata: {\"message\":\"overloaded\"}\n\n", openAIAPI, false, ""},
			// Some OpenAI-compatible servers never send [DONE]: the answer
			// is whole once a choice's finish_reason came.
			{"chat finished without [DONE]", chunk + finish + usageChunk, openAIAPI, false, ""},
			{"chat finished without [DONE], spaced JSON", chunk + `data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}` + "\n\n", openAIAPI, false, ""},
			{"chat cut, finish_reason null", chunk + nullFinish, openAIAPI, false, `"code":"stream_incomplete"`},
			{"chat cut after the usage chunk", chunk + usageChunk, openAIAPI, false, `"code":"stream_incomplete"`},
			{"messages ended", start + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", messagesAPI, false, ""},
			{"messages ended, a stray line end and a comment", start + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n\n: x\n\n", messagesAPI, false, ""},
			{"messages ended by an error", start + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"o\"}}\n\n", messagesAPI, false, ""},
			{"messages cut", start, messagesAPI, false, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\""},
			{"responses ended", delta + "event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n", responsesAPI, false, ""},
			{"responses ended, no event names", "data: {\"type\":\"response.incomplete\"}\n\n", responsesAPI, false, ""},
			{"responses cut", delta, responsesAPI, false, "event: error\ndata: {\"type\":\"error\",\"code\":\"stream_incomplete\""},
			{"responses cut, read by a relay", delta, responsesAPI, true, `"code":"stream_incomplete"`},
			{"responses ended, read by a relay", delta + "event: response.failed\ndata: {\"type\":\"response.failed\"}\n\n", responsesAPI, true, ""},
		} {
			for cut := range len(tc.stream) {
				rec := httptest.NewRecorder()
				tap := &tapStream{m: &meter{}, ends: tc.api.ends}
				if tc.relay {
					tap.inner = &pointerTap{onID: func(string) {}}
				}
				w := &upstreamWriter{client: rec, header: make(http.Header), framing: providers.SSE, api: tc.api, wantStream: true, tr: tap}
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
		w := &upstreamWriter{client: rec, header: make(http.Header), framing: providers.SSE, api: openAIAPI, wantStream: false}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: x\n\n"))
		if w.streaming || rec.Body.Len() != 0 {
			t.Fatal("a non-stream request must never stream")
		}
	})
}

func TestFailureRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name         string
		header       http.Header
		after        time.Duration
		want, wantMs string
	}{
		{"from the body", http.Header{}, 1500 * time.Millisecond, "2", "1500"},
		{"the provider's header wins", http.Header{"Retry-After": {"7"}}, time.Second, "7", ""},
		{"none", http.Header{}, 0, "", ""},
	} {
		rec := httptest.NewRecorder()
		f := &failure{err: &providers.Error{Status: 429, Type: "rate_limit_error", Message: "slow down", RetryAfter: tc.after}, header: tc.header}
		f.write(rec, openAIAPI)
		if rec.Code != 429 || rec.Header().Get("Retry-After") != tc.want || rec.Header().Get("Retry-After-Ms") != tc.wantMs {
			t.Errorf("%s: %d %v", tc.name, rec.Code, rec.Header())
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

// notEnding is endingTranslator without providers.StreamEnder.
type notEnding struct{ e *endingTranslator }

func (n notEnding) Event(dst, ev []byte) ([]byte, error) { return n.e.Event(dst, ev) }
func (n notEnding) Close(dst []byte) []byte              { return n.e.Close(dst) }

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
			w := &upstreamWriter{client: rec, header: make(http.Header), framing: lineFraming{}, api: openAIAPI, wantStream: true, tr: tr}
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

// TestSetPath: a plain path is set as the general case (unescape, then
// Go's escaping) sets it, and paths with escapes, reserved and
// non-ASCII bytes still go the general way.
func TestSetPath(t *testing.T) {
	general := func(raw string) url.URL {
		var u url.URL
		u.RawPath = raw
		if p, err := url.PathUnescape(raw); err == nil {
			u.Path = p
		} else {
			u.Path = raw
		}
		if u.EscapedPath() != u.RawPath {
			u.RawPath = ""
		}
		return u
	}
	paths := []string{"", "/", "/v1/chat/completions", "/openai/deployments/gpt-4o_mini.v2/chat/completions",
		"/v1beta/models/gemini-2.5-pro:streamGenerateContent", "/model/anthropic.claude-3-5:0/converse-stream",
		"/a~b$c&d+e,f;g=h@i", "/a%2Fb", "/a%zz", "/a b", "/é", "/a?b", "/a#b", "/a!b", "/a'b(c)*", "/a%20b"}
	for c := 0; c < 256; c++ {
		paths = append(paths, "/x"+string(rune(c))+"y", "/x"+string([]byte{byte(c)}))
	}
	for _, raw := range paths {
		var got url.URL
		setPath(&got, raw)
		if want := general(raw); got != want {
			t.Errorf("%q: %+v, want %+v", raw, got, want)
		}
		if plainPath(raw) && got.EscapedPath() != raw {
			t.Errorf("%q, plain, is sent as %q", raw, got.EscapedPath())
		}
	}
}
