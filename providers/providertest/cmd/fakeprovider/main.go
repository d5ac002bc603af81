// Command fakeprovider serves modelgate's fake model provider on one port,
// speaking OpenAI's chat completions (POST /v1/chat/completions),
// Anthropic's Messages API (POST /v1/messages) and eight rerank formats (see
// package providertest). It is what the quick start
// runs instead of real providers:
//
//	go run ./providers/providertest/cmd/fakeprovider -listen 127.0.0.1:9999
//
// It answers "echo: <your last message>", calls the first tool you offer,
// and follows the scripted model names documented in package providertest.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/providertest"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9999", "address to listen on")
	openAIKey := flag.String("openai-key", "", "require this bearer key on the OpenAI route (default: any)")
	anthropicKey := flag.String("anthropic-key", "", "require this x-api-key on the Anthropic route (default: any)")
	flag.Parse()

	fake := providertest.New(providertest.Options{OpenAIKey: *openAIKey, AnthropicKey: *anthropicKey, NoRecord: true})
	srv := &http.Server{
		Addr:              *listen,
		Handler:           logRequests(fake),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Printf("fake provider listening on %s", *listen)
	log.Printf("OpenAI-compatible base_url: http://%s/v1", *listen)
	log.Printf("Anthropic base_url: http://%s", *listen)
	log.Printf("rerank base_url: http://%s/<type> for cohere and tei and infinity, http://%s/<type>/v1 for jina, voyage, vllm, together and mixedbread", *listen, *listen)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// logRequests logs one line per request: method, path, model and status.
// Keys are never logged.
func logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := readBody(r)
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		next.ServeHTTP(rec, r)
		log.Printf("%s %s model=%q status=%d %s", r.Method, r.URL.Path,
			gjson.GetBytes(body, "model").Str, rec.status, time.Since(start).Round(time.Millisecond))
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the real writer for flushes.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// readBody reads the body and puts it back for the handler.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, err
}
