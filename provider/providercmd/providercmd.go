package providercmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/keymount/keymount/internal/logredact"
	"github.com/keymount/keymount/provider/server"
)

// Main is what a provider binary's main does once its flags are parsed:
// with printVersion it prints "<binary> <version>"; else it keeps HTTP
// bodies out of every log (logredact) and runs run as Run does. It returns
// the exit code: 1 when run failed, else 0.
func Main(binary, version string, printVersion bool, run func(context.Context) error) int {
	if printVersion {
		fmt.Println(binary + " " + version)
		return 0
	}
	logredact.Install() // no HTTP body (Secrets, tokens) in any log, at any -v
	if err := Run(binary, run); err != nil {
		return 1
	}
	return 0
}

// Run calls run with a context that is cancelled on SIGINT or SIGTERM,
// logs its error as "<binary> stopped", and flushes the log. main exits
// non-zero when it returns an error.
func Run(binary string, run func(context.Context) error) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		klog.ErrorS(err, binary+" stopped")
	}
	klog.Flush()
	return err
}

// ServeMetrics serves h on addr's /metrics (the --metrics-addr flag) until
// the returned func is called.
func ServeMetrics(ctx context.Context, addr string, h http.Handler) (stop func(), err error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "metrics server stopped")
		}
	}()
	klog.InfoS("serving metrics", "addr", l.Addr().String())
	return func() { _ = srv.Close() }, nil
}

// Serve serves p on cfg's socket until ctx is done. It logs "serving" with
// the provider, its socket, keysAndValues and cfg.Version, and "stopped"
// after a clean stop.
func Serve(ctx context.Context, cfg server.Config, p server.Provider, keysAndValues ...any) error {
	srv, err := server.New(cfg, p)
	if err != nil {
		return err
	}
	kv := append([]any{"provider", cfg.Name, "socket", srv.SocketPath()}, keysAndValues...)
	klog.InfoS("serving", append(kv, "version", cfg.Version)...)
	if err := srv.Serve(ctx); err != nil {
		return err
	}
	klog.InfoS("stopped", "provider", cfg.Name)
	return nil
}
