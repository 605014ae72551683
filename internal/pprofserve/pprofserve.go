// Package pprofserve serves Go's pprof handlers on the loopback interface,
// for the binaries' --enable-pprof flags.
package pprofserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"k8s.io/klog/v2"
)

// Serve serves pprof on 127.0.0.1:port (0: any free port) until the
// returned func is called, and returns the address it listens on. Only
// loopback: profiles show memory, never to the network.
func Serve(ctx context.Context, port int) (stop func(), addr string, err error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, "", fmt.Errorf("--pprof-port %d: %w", port, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "pprof server stopped")
		}
	}()
	klog.InfoS("serving pprof", "addr", l.Addr().String())
	return func() { _ = srv.Close() }, l.Addr().String(), nil
}
