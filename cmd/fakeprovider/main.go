// Command fakeprovider serves modelgate's fake model provider on one port,
// speaking OpenAI's chat completions (POST /v1/chat/completions),
// Anthropic's Messages API (POST /v1/messages) and eight rerank formats (see
// package providertest). It is what the quick start
// runs instead of real providers:
//
//	go run ./cmd/fakeprovider -listen 127.0.0.1:9999
//
// It answers "echo: <your last message>", calls the first tool you offer,
// and follows the scripted model names documented in package providertest.
// It accepts any key unless -openai-key or -anthropic-key names one, logs
// one line per request (method, path, model, status; never a key) and stops
// cleanly on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelgate/modelgate/providers/providertest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "fakeprovider:", err)
		}
		os.Exit(2)
	}
}

// run serves until ctx ends, logging to out, then shuts down (waiting up to
// 5 s for requests under way).
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fakeprovider", flag.ContinueOnError)
	fs.SetOutput(out)
	listen := fs.String("listen", "127.0.0.1:9999", "address to listen on (port 0 picks a free port)")
	openAIKey := fs.String("openai-key", "", "require this bearer key on the OpenAI route (default: any)")
	anthropicKey := fs.String("anthropic-key", "", "require this x-api-key on the Anthropic route (default: any)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	logger := log.New(out, "", log.LstdFlags)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fake := providertest.New(providertest.Options{
		OpenAIKey: *openAIKey, AnthropicKey: *anthropicKey, NoRecord: true,
		// One line per request: method, path, model and status. Keys are
		// never logged.
		Log: func(r providertest.Recorded, status int) {
			logger.Printf("%s %s model=%q status=%d %s", r.Method, r.Path, r.Model, status, time.Since(r.At).Round(time.Millisecond))
		},
	})
	srv := &http.Server{
		Handler:           fake,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          logger,
	}
	host := baseHost(ln.Addr().(*net.TCPAddr))
	logger.Printf("fake provider listening on %s", ln.Addr())
	logger.Printf("OpenAI-compatible base_url: http://%s/v1", host)
	logger.Printf("Anthropic base_url: http://%s", host)
	logger.Printf("rerank base_url: http://%s/<type> for cohere and tei and infinity, http://%s/<type>/v1 for jina, voyage, vllm, together and mixedbread", host, host)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	logger.Printf("shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		// Streams still open (a gated one waits up to 10 s): cut them.
		_ = srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// baseHost is the host:port clients should use for addr: a wildcard
// address becomes the loopback one.
func baseHost(addr *net.TCPAddr) string {
	ip := addr.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(addr.Port))
}
