package ctrltest

import (
	"context"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/keymount/keymount/provider/server"
)

// NewManager returns a manager of opts against cfg that opens no metrics
// or health probe listener and lets every test of the binary register
// controllers of the same names.
func NewManager(tb testing.TB, cfg *rest.Config, opts ctrl.Options) ctrl.Manager {
	tb.Helper()
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return mgr
}

// Start runs mgr until the test ends; the test fails if it stops with an
// error.
func Start(tb testing.TB, mgr ctrl.Manager) {
	tb.Helper()
	ctx, stop := context.WithCancel(context.WithoutCancel(tb.Context()))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	tb.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			tb.Errorf("manager: %v", err)
		}
	})
}

// ServeProvider serves p as provider name, version "test", on
// <dir>/<name>.sock until the test ends; the test fails if serving fails.
func ServeProvider(tb testing.TB, dir, name string, p server.Provider) {
	tb.Helper()
	srv, err := server.New(server.Config{Name: name, Version: "test", SocketDir: dir}, p)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.WithoutCancel(tb.Context()))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	tb.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			tb.Errorf("provider %s: %v", name, err)
		}
	})
}
