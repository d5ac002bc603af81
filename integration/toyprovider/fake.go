package toyprovider

import (
	"crypto/hmac"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// Fake is a server that speaks the toy format: it refuses requests whose
// signature does not verify (403), answers "echo: <last user text>", and
// for the model "busy" answers 429 with {"fault":{"kind":"busy"}}.
type Fake struct {
	Signer Signer
	// Requests counts the requests that verified.
	Requests atomic.Int64
}

// ServeHTTP answers one toy request.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	want := f.Signer.Signature(r.Method, r.RequestURI, r.Host, r.Header.Get("X-Toy-Date"), body)
	if !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Toy-Signature"))) {
		fault(w, http.StatusForbidden, "denied", "bad signature")
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/generate") || !gjson.ValidBytes(body) {
		fault(w, http.StatusBadRequest, "bad", "not a toy request")
		return
	}
	f.Requests.Add(1)
	if r.URL.Query().Get("model") == "busy" {
		w.Header().Set("X-Toy-Retry-After", "3")
		fault(w, http.StatusTooManyRequests, "busy", "too many requests")
		return
	}
	var last string
	in := 0
	for _, m := range gjson.GetBytes(body, "prompt").Array() {
		in += len(strings.Fields(m.Get("text").Str))
		if m.Get("who").Str == "user" {
			last = m.Get("text").Str
		}
	}
	words := strings.Fields("echo: " + last)
	usage := []byte(`{"in":`)
	usage = providers.AppendInt(usage, int64(in))
	usage = append(usage, `,"out":`...)
	usage = providers.AppendInt(usage, int64(len(words)))
	usage = append(usage, '}')
	if r.URL.Query().Get("stream") != "1" {
		out := []byte(`{"id":"toy-1","text":`)
		out = providers.AppendString(out, strings.Join(words, " "))
		out = append(append(append(out, `,"words":`...), usage...), '}')
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
		return
	}
	w.Header().Set("Content-Type", MediaType)
	for i, word := range words {
		if i > 0 {
			word = " " + word
		}
		writeFrame(w, providers.AppendString([]byte(`{"text":`), word), '}')
	}
	writeFrame(w, append([]byte(`{"done":true,"words":`), usage...), '}')
}

func writeFrame(w http.ResponseWriter, body []byte, end byte) {
	body = append(body, end)
	_, _ = w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))))
	_, _ = w.Write(body)
	_ = http.NewResponseController(w).Flush()
}

func fault(w http.ResponseWriter, status int, kind, detail string) {
	b := []byte(`{"fault":{"kind":`)
	b = providers.AppendString(b, kind)
	b = append(b, `,"detail":`...)
	b = providers.AppendString(b, detail)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, "}}"...))
}
