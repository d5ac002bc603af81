//go:build linux

package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/providertest"
)

// The upstream serves the providers' wire formats on loopback, in a
// process of its own, for every variant alike. Two kinds:
//
//   - canned (the default): at start it asks the repository's fake provider
//     (package providertest) once for the answer to each scenario's request,
//     in-process, and then serves those recorded answers, byte for byte, to
//     any request with the same path, model, stream flag and
//     encoding_format. A stream is sent event by event, each flushed, as
//     the fake sends it (paced by -pace for the paced model). It reads every
//     request body whole but does not check it: the fake already checks the
//     same requests strictly in the repository's tests, and here its
//     checks would cost as much CPU as the proxy being measured, on the
//     same core, and pull every ratio towards 1.
//   - fake: package providertest itself, checking every request (NoRecord).
//
// -tls serves HTTPS with a fresh self-signed certificate, offering HTTP/2
// unless -h2=false.
func runUpstream(args []string) error {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	kind := fs.String("kind", "canned", "canned or fake")
	pace := fs.Duration("pace", time.Second, "time between events of the paced model's streams")
	useTLS := fs.Bool("tls", false, "serve HTTPS (self-signed)")
	h2 := fs.Bool("h2", true, "offer HTTP/2 over TLS")
	withHeaders := fs.Bool("provider-headers", true, "canned: send the response headers the real provider sends with every answer (rate limits, request id, …)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	raiseFileLimit()

	fake := providertest.New(providertest.Options{
		OpenAIKey: upstreamOpenAIKey, AnthropicKey: upstreamAnthropicKey, NoRecord: true,
		Keys: map[string]string{"cohere": upstreamCohereKey},
	})
	var h http.Handler
	switch *kind {
	case "fake":
		h = fake
	case "canned":
		c, err := record(fake, *withHeaders)
		if err != nil {
			return err
		}
		c.pace = *pace
		h = c
	default:
		return fmt.Errorf("-kind %q: canned or fake", *kind)
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	if *useTLS {
		cert, err := selfSigned()
		if err != nil {
			return err
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		if !*h2 {
			srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){} // HTTP/1.1 only
		}
	}
	// The orchestrator reads the address from the first line.
	fmt.Printf("listening %s\n", ln.Addr())
	if *useTLS {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// canned serves recorded answers.
type canned struct {
	answers map[string]*answer
	pace    time.Duration
}

type answer struct {
	status int
	header http.Header
	body   []byte
	events [][]byte // a stream's events, each with its blank line
}

// cannedKey is what tells the recorded answers apart.
func cannedKey(path string, body []byte) string {
	r := gjson.GetManyBytes(body, "model", "stream", "encoding_format")
	return path + "\x00" + r[0].Str + "\x00" + r[1].Raw + "\x00" + r[2].Str
}

// record asks the fake for the answer to every upstream request of the
// scenarios; withHeaders adds the provider's own response headers
// (providertest.ResponseHeaders) to each answer.
func record(fake http.Handler, withHeaders bool) (*canned, error) {
	c := &canned{answers: map[string]*answer{}}
	for _, req := range allUpstreamRequests() {
		hr := httptest.NewRequest(http.MethodPost, req.path, bytes.NewReader(req.body))
		hr.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(req.header); i += 2 {
			hr.Header.Set(req.header[i], req.header[i+1])
		}
		rec := httptest.NewRecorder()
		fake.ServeHTTP(rec, hr)
		if rec.Code != http.StatusOK {
			return nil, fmt.Errorf("recording %s: the fake answered %d: %s", req.path, rec.Code, rec.Body.Bytes())
		}
		a := &answer{status: rec.Code, header: rec.Header().Clone(), body: rec.Body.Bytes()}
		a.header.Del("Date")
		if withHeaders {
			for k, v := range providertest.ResponseHeaders(req.path) {
				if a.header[k] == nil {
					a.header[k] = v
				}
			}
		}
		if strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") {
			for rest := a.body; len(rest) > 0; {
				i := bytes.Index(rest, []byte("\n\n"))
				if i < 0 {
					a.events = append(a.events, rest)
					break
				}
				a.events = append(a.events, rest[:i+2])
				rest = rest[i+2:]
			}
		} else {
			a.header.Set("Content-Length", fmt.Sprint(len(a.body)))
		}
		c.answers[cannedKey(req.path, req.body)] = a
	}
	return c, nil
}

func (c *canned) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a := c.answers[cannedKey(r.URL.Path, body)]
	if a == nil {
		http.Error(w, "loadbench upstream: no recorded answer for "+r.URL.Path+" "+gjson.GetBytes(body, "model").Str, http.StatusNotFound)
		return
	}
	h := w.Header()
	for k, v := range a.header {
		h[k] = v
	}
	w.WriteHeader(a.status)
	if a.events == nil {
		_, _ = w.Write(a.body)
		return
	}
	paced := strings.HasPrefix(gjson.GetBytes(body, "model").Str, pacedModel)
	rc := http.NewResponseController(w)
	for i, ev := range a.events {
		if paced && i > 0 {
			select {
			case <-time.After(c.pace):
			case <-r.Context().Done():
				return
			}
		}
		if _, err := w.Write(ev); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// selfSigned makes a certificate for 127.0.0.1.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "loadbench upstream"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// waitListening reads the child's first line, "listening <addr>".
func parseListening(line string) (string, error) {
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		return "", fmt.Errorf("unexpected first line %q", line)
	}
	return addr, nil
}
