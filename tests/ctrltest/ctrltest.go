package ctrltest

import (
	"context"
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/tests/poll"
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

// WaitSecret polls the Secret ns/name until check passes (a nil Secret:
// it does not exist), and fails the test with check's last message after
// poll.Deadline.
func WaitSecret(tb testing.TB, cs kubernetes.Interface, ns, name string, check func(*corev1.Secret) error) {
	tb.Helper()
	WaitFor(tb, "Secret "+ns+"/"+name, func(ctx context.Context) (*corev1.Secret, error) {
		return cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	}, check)
}

// WaitFor polls get until check passes on what it returns (nil when get
// finds nothing), and fails the test, naming what, with check's last
// message after poll.Deadline. An error of get other than not found fails
// too.
func WaitFor[T any](tb testing.TB, what string, get func(ctx context.Context) (*T, error), check func(*T) error) {
	tb.Helper()
	var last error
	err := poll.Wait(tb.Context(), poll.Deadline, func(ctx context.Context) (bool, error) {
		o, err := get(ctx)
		if apierrors.IsNotFound(err) {
			o, err = nil, nil
		}
		if err != nil {
			return false, err
		}
		last = check(o)
		return last == nil, nil
	})
	if err != nil {
		tb.Fatalf("%s: %v (%v)", what, last, err)
	}
}

// HasData is a WaitSecret check: the Secret exists with exactly data.
func HasData(data map[string]string) func(*corev1.Secret) error {
	return func(s *corev1.Secret) error {
		if s == nil {
			return fmt.Errorf("missing, want data %v", data)
		}
		got := map[string]string{}
		for k, v := range s.Data {
			got[k] = string(v)
		}
		if !maps.Equal(got, data) {
			return fmt.Errorf("data %v, want %v", got, data)
		}
		return nil
	}
}
