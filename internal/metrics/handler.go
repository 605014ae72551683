package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the metrics on GET /metrics in Prometheus' text format,
// and every other path with health (the driver's /healthz and /readyz);
// health nil serves metrics only.
func (m *Metrics) Handler(health http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	if health != nil {
		mux.Handle("/", health)
	}
	return mux
}
