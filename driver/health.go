package driver

import (
	"net/http"
)

// HealthHandler serves /healthz (the CSI socket is served: the liveness
// probe's question, true while the driver waits for the API server) and
// /readyz (what Probe reports: providers reachable and API caches synced).
func (d *Driver) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, d.serving.Load())
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, d.Ready())
	})
	return mux
}

func answer(w http.ResponseWriter, ok bool) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready\n"))
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}
