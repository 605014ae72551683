package main

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

// servePprof serves Go's pprof handlers on 127.0.0.1:port until the
// returned func is called. Only loopback: profiles show memory, never to
// the network.
func servePprof(ctx context.Context, port int) (func(), error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-port %d: %w", port, err)
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
	return func() { _ = srv.Close() }, nil
}
