//go:build linux

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// streamsResult is what the many-streams client prints at the end.
type streamsResult struct {
	Streams   int     `json:"streams"`
	Completed int64   `json:"completed"` // ended with the expected number of events
	Failed    int64   `json:"failed"`
	FirstErr  string  `json:"first_error,omitempty"`
	Events    int64   `json:"events"`
	MaxOpen   int64   `json:"max_open"` // most streams open at once
	AllOpenS  float64 `json:"all_open_s"`
	Seconds   float64 `json:"seconds"`
}

// runStreams opens -n streams, each on a connection of its own, spread
// over -ramp, and reads each to its end, checking it carried -events
// events. It prints "open <n>" once every stream has received its first
// event (all are open at once: each lasts longer than the ramp), with the
// events delivered until then (of the streams that ended), then its
// streamsResult as JSON.
func runStreams(args []string) error {
	fs := flag.NewFlagSet("streams", flag.ContinueOnError)
	url := fs.String("url", "", "URL to POST to")
	bodyFile := fs.String("body", "", "file holding the request body")
	n := fs.Int("n", 1000, "streams")
	ramp := fs.Duration("ramp", 5*time.Second, "time over which the streams are opened")
	want := fs.Int64("events", 0, "events each stream must carry (0: any)")
	timeout := fs.Duration("timeout", 2*time.Minute, "longest a stream may take")
	var headers headerFlags
	fs.Var(&headers, "H", "request header, Name: value (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if limit := raiseFileLimit(); limit < uint64(*n)+100 {
		return fmt.Errorf("%d streams need %d open files; the limit is %d", *n, *n+100, limit)
	}
	body, err := os.ReadFile(*bodyFile)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext:        (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		DisableKeepAlives:  true, // one connection per stream, closed at its end
		DisableCompression: true,
	}}
	ctx, cancel := context.WithTimeout(context.Background(), *ramp+*timeout)
	defer cancel()

	var (
		opened, open, maxOpen atomic.Int64
		completed, failed     atomic.Int64
		events                atomic.Int64
		firstErr              atomic.Value
		allOpen               atomic.Int64 // ns since start when the last stream opened
		closing               atomic.Bool  // a stream has ended
		wg                    sync.WaitGroup
	)
	fail := func(err error) {
		failed.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	start := time.Now()
	for i := range *n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * *ramp / time.Duration(*n))))
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, *url, strings.NewReader(string(body)))
			req.Header.Set("Content-Type", "application/json")
			for i := 0; i+1 < len(headers); i += 2 {
				req.Header.Set(headers[i], headers[i+1])
			}
			res, err := client.Do(req)
			if err != nil {
				fail(err)
				return
			}
			defer func() { _ = res.Body.Close() }()
			if res.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(res.Body, 300))
				fail(fmt.Errorf("status %d: %s", res.StatusCode, b))
				return
			}
			ev := &eventCounter{onFirst: func() {
				if o := open.Add(1); o > maxOpen.Load() {
					maxOpen.Store(o) // racy max, good enough: reported, not relied upon
				}
				if opened.Add(1) == int64(*n) {
					allOpen.Store(int64(time.Since(start)))
					fmt.Printf("open %d %d\n", *n, events.Load())
				}
			}}
			ev.total = &events
			_, err = io.Copy(ev, res.Body)
			if closing.CompareAndSwap(false, true) {
				// The first stream to end: from here on connections
				// close, and the steady phase (every stream open, events
				// only) is over.
				fmt.Printf("closing %d\n", events.Load())
			}
			if ev.n > 0 {
				open.Add(-1)
			}
			switch {
			case err != nil:
				fail(err)
			case *want > 0 && ev.n != *want:
				fail(fmt.Errorf("a stream carried %d events, not %d", ev.n, *want))
			default:
				completed.Add(1)
			}
		}()
	}
	wg.Wait()
	res := streamsResult{
		Streams: *n, Completed: completed.Load(), Failed: failed.Load(), Events: events.Load(),
		MaxOpen: maxOpen.Load(), AllOpenS: time.Duration(allOpen.Load()).Seconds(), Seconds: time.Since(start).Seconds(),
	}
	if v := firstErr.Load(); v != nil {
		res.FirstErr = v.(string)
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// eventCounter counts the events of a stream written through it: each
// blank line that ends a block of lines.
type eventCounter struct {
	n       int64
	inLine  bool // bytes since the last newline
	inEvent bool
	onFirst func()
	total   *atomic.Int64 // every stream's events, counted as they arrive
}

func (c *eventCounter) Write(p []byte) (int, error) {
	for _, b := range p {
		switch b {
		case '\r':
			continue
		case '\n':
			if !c.inLine && c.inEvent {
				c.n++
				c.inEvent = false
				if c.total != nil {
					c.total.Add(1)
				}
				if c.n == 1 && c.onFirst != nil {
					c.onFirst()
				}
			}
			c.inLine = false
		default:
			c.inLine, c.inEvent = true, true
		}
	}
	return len(p), nil
}
