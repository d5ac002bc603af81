//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// headerFlags collects repeated -H "Name: value" flags.
type headerFlags []string

func (h *headerFlags) String() string { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok {
		return fmt.Errorf("header %q: want Name: value", v)
	}
	*h = append(*h, strings.TrimSpace(name), strings.TrimSpace(value))
	return nil
}

// loadResult is what one load run measured, as the load generator prints
// it (JSON, one line).
type loadResult struct {
	Requests int64   `json:"requests"` // completed within the window
	Errors   int64   `json:"errors"`
	FirstErr string  `json:"first_error,omitempty"`
	Seconds  float64 `json:"seconds"` // the window
	Events   int64   `json:"events"`  // SSE events of the requests counted
	// Latency percentiles in microseconds: whole answer, and (streams)
	// first event.
	P50   float64 `json:"p50_us"`
	P99   float64 `json:"p99_us"`
	TTFT  float64 `json:"ttft_p50_us"`
	TTF99 float64 `json:"ttft_p99_us"`
	// EventsPerStream is min and max events of one stream.
	MinEvents int64 `json:"min_events"`
	MaxEvents int64 `json:"max_events"`
}

// runLoad is the load generator: a closed loop of -c clients, each with
// its own keep-alive HTTP/1.1 connection, sending the same request for
// -warmup and then -duration, and reading each answer whole; a stream's
// events are counted as they arrive and the first one timed. It prints
// "measuring" when the warm-up ends and, after the window, its loadResult
// as JSON. Answers other than 200 are errors; the first answer must
// contain -expect.
func runLoad(args []string) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	url := fs.String("url", "", "URL to POST to")
	bodyFile := fs.String("body", "", "file holding the request body")
	conns := fs.Int("c", 50, "connections (concurrent clients)")
	duration := fs.Duration("duration", 5*time.Second, "measured window")
	warmup := fs.Duration("warmup", time.Second, "unmeasured warm-up before the window")
	stream := fs.Bool("stream", false, "answers are event streams: count events, time the first")
	expect := fs.String("expect", "", "a string the first answer must contain")
	var headers headerFlags
	fs.Var(&headers, "H", "request header, Name: value (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	raiseFileLimit()
	body, err := os.ReadFile(*bodyFile)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        *conns,
		MaxIdleConnsPerHost: *conns,
		MaxConnsPerHost:     *conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}}
	send := func(ctx context.Context, keep bool) (lat, ttft time.Duration, events int64, first []byte, err error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, *url, bytes.NewReader(body))
		if err != nil {
			return 0, 0, 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			return 0, 0, 0, nil, err
		}
		defer func() { _ = res.Body.Close() }()
		if res.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
			return 0, 0, 0, nil, fmt.Errorf("status %d: %s", res.StatusCode, b)
		}
		if !*stream {
			var buf bytes.Buffer
			w := io.Discard
			if keep {
				w = &buf
			}
			if _, err := io.Copy(w, res.Body); err != nil {
				return 0, 0, 0, nil, err
			}
			return time.Since(start), 0, 0, buf.Bytes(), nil
		}
		events, ttft, all, err := readEvents(res.Body, start, keep)
		return time.Since(start), ttft, events, all, err
	}

	// Check the answer once, before the clock runs.
	_, _, _, first, err := send(context.Background(), true)
	if err != nil {
		return fmt.Errorf("first request: %w", err)
	}
	if *expect != "" && !bytes.Contains(first, []byte(*expect)) {
		return fmt.Errorf("first answer lacks %q: %.600s", *expect, first)
	}

	type sample struct {
		lat, ttft time.Duration
		events    int64
	}
	var (
		mu       sync.Mutex
		samples  []sample
		errCount atomic.Int64
		firstErr atomic.Value
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	begin := time.Now()
	winStart, winEnd := begin.Add(*warmup), begin.Add(*warmup+*duration)
	var wg sync.WaitGroup
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]sample, 0, 1024)
			for time.Now().Before(winEnd) {
				lat, ttft, ev, _, err := send(ctx, false)
				done := time.Now()
				inWindow := done.After(winStart) && !done.After(winEnd)
				if err != nil {
					if ctx.Err() == nil && inWindow {
						errCount.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
					continue
				}
				if inWindow {
					local = append(local, sample{lat, ttft, ev})
				}
			}
			mu.Lock()
			samples = append(samples, local...)
			mu.Unlock()
		}()
	}
	time.Sleep(time.Until(winStart))
	fmt.Println("measuring")
	time.Sleep(time.Until(winEnd))
	fmt.Println("window ended")
	// Requests still under way finish outside the window; a hung one is
	// cut after a while.
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		cancel()
		<-waited
	}

	res := loadResult{Requests: int64(len(samples)), Errors: errCount.Load(), Seconds: duration.Seconds()}
	if v := firstErr.Load(); v != nil {
		res.FirstErr = v.(string)
	}
	lats := make([]time.Duration, len(samples))
	ttfts := make([]time.Duration, 0, len(samples))
	res.MinEvents = -1
	for i, s := range samples {
		lats[i] = s.lat
		res.Events += s.events
		if *stream {
			ttfts = append(ttfts, s.ttft)
			if res.MinEvents < 0 || s.events < res.MinEvents {
				res.MinEvents = s.events
			}
			res.MaxEvents = max(res.MaxEvents, s.events)
		}
	}
	res.MinEvents = max(res.MinEvents, 0)
	res.P50, res.P99 = percentile(lats, 0.50), percentile(lats, 0.99)
	res.TTFT, res.TTF99 = percentile(ttfts, 0.50), percentile(ttfts, 0.99)
	return json.NewEncoder(os.Stdout).Encode(res)
}

// readEvents reads an event stream to its end, counting events (blocks
// ended by a blank line) and timing the first from start. It returns the
// stream's bytes only for the first request's check.
func readEvents(r io.Reader, start time.Time, keepBytes bool) (events int64, ttft time.Duration, all []byte, err error) {
	br := bufio.NewReaderSize(r, 16<<10)
	inEvent := false
	var keep bytes.Buffer
	for {
		line, err := br.ReadSlice('\n')
		if keepBytes && keep.Len() < 1<<20 {
			keep.Write(line)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			inEvent = true
			continue
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		switch {
		case len(trimmed) == 0 && inEvent && err == nil:
			events++
			if events == 1 {
				ttft = time.Since(start)
			}
			inEvent = false
		case len(trimmed) > 0:
			inEvent = true
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return events, ttft, keep.Bytes(), err
		}
	}
}

// percentile of d in microseconds; d is sorted in place.
func percentile(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[int(p*float64(len(d)-1))]) / float64(time.Microsecond)
}
