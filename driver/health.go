package driver

import (
	"net/http"
	"strings"
)

// HealthCheck is one more condition of /healthz, such as the registration
// with kubelet: nil while healthy, otherwise why not. Its error is served to
// whoever asks /healthz, so it must not hold anything secret.
type HealthCheck func() error

// HealthHandler serves /healthz (the CSI socket is served and every check
// passes: the liveness probe's question, true while the driver waits for the
// API server) and /readyz (what Probe reports: the provider directory
// readable, API caches synced, every provider a mounted volume uses
// answering). A failed check answers 503 with its error on one line; a
// /readyz that is not ready says why, naming the provider.
func (d *Driver) HealthHandler(checks ...HealthCheck) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !d.serving.Load() {
			answer(w, false)
			return
		}
		for _, check := range checks {
			if err := check(); err != nil {
				reply(w, http.StatusServiceUnavailable, strings.Join(strings.Fields(err.Error()), " "))
				return
			}
		}
		answer(w, true)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := d.NotReady(); err != nil {
			reply(w, http.StatusServiceUnavailable, "not ready: "+strings.Join(strings.Fields(err.Error()), " "))
			return
		}
		answer(w, true)
	})
	return mux
}

func answer(w http.ResponseWriter, ok bool) {
	if !ok {
		reply(w, http.StatusServiceUnavailable, "not ready")
		return
	}
	reply(w, http.StatusOK, "ok")
}

// reply answers code with msg, one line of plain text.
func reply(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg + "\n"))
}
