package caddymodule

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are modelgate's collectors. They are created once per process and
// registered into every config's registry (Caddy makes a new one per
// config), so counts carry on across reloads. Labels hold only configured
// names and status codes, never a client-chosen model name, so their
// cardinality stays bounded.
var metrics = struct {
	requests  *prometheus.CounterVec
	upstream  *prometheus.HistogramVec
	fallbacks *prometheus.CounterVec
}{
	requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "requests_total",
		Help: "Requests answered by modelgate, by endpoint, provider that answered (empty: none) and status code.",
	}, []string{"endpoint", "provider", "code"}),
	upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "upstream_duration_seconds",
		Help:    "Time of each provider call, streams included, by provider and the provider's status code (\"error\": no answer).",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	}, []string{"provider", "code"}),
	fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "modelgate", Name: "fallbacks_total",
		Help: "Provider calls that failed (unreachable, 429, 5xx) and passed the request on to the next target.",
	}, []string{"provider"}),
}

// registerMetrics adds modelgate's collectors to a config's registry.
func registerMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{metrics.requests, metrics.upstream, metrics.fallbacks} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}

// observeUpstream records one provider call; status 0 means no answer.
func observeUpstream(provider string, status int, start time.Time) {
	code := "error"
	if status > 0 {
		code = strconv.Itoa(status)
	}
	metrics.upstream.WithLabelValues(provider, code).Observe(time.Since(start).Seconds())
}

// observeRequest records one answered request.
func observeRequest(endpoint, provider string, status int) {
	metrics.requests.WithLabelValues(endpoint, provider, strconv.Itoa(status)).Inc()
}
