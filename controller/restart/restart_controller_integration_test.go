//go:build integration

package restart_test

import (
	"context"
	"errors"
	"testing"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/keymount/keymount/controller/restart"
	"github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/tests/k8senv"
)

// testHashKey keys the Secret digests of the tests' controllers.
var testHashKey = []byte("0123456789abcdef0123456789abcdef")

// startAPIWithCRDs starts a control plane with keymount's CRDs for one
// test.
func startAPIWithCRDs(t *testing.T) *apps {
	t.Helper()
	// Own, not shared: its tests run the restart controller, which watches
	// every namespace (another test's workloads and Secrets would reach it),
	// or assert on the component's RBAC.
	env := k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: []string{"../../deploy/crds"}})
	return &apps{env: env, admin: newAdmin(env)}
}

// startController runs a controller manager with restart.SetupWithManager
// as cfg until the test ends (no leader election, no listener).
func startController(t *testing.T, cfg *rest.Config, opts restart.Options) {
	t.Helper()
	startControllerSharing(t, cfg, opts, false)
}

// startControllerSharing starts the controller; with shared, as
// keymount-controller runs it: synced Secrets read in the manager's cache,
// configured as the SecretSync reconciler configures it and annotated by
// restart.SecretDigests.Record (Options.SecretCache, Options.SecretDigests).
func startControllerSharing(t *testing.T, cfg *rest.Config, opts restart.Options, shared bool) {
	t.Helper()
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	mopts := ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}
	if shared {
		opts.SecretDigests = restart.NewSecretDigests(opts.HashKey)
		mopts.Cache, err = secretsync.CacheOptions(opts.SecretDigests.Record)
		if err != nil {
			t.Fatal(err)
		}
	}
	mgr, err := ctrl.NewManager(rest.CopyConfig(cfg), mopts)
	if err != nil {
		t.Fatal(err)
	}
	if shared {
		opts.SecretCache = mgr.GetCache()
	}
	if err := restart.SetupWithManager(t.Context(), mgr, opts); err != nil {
		t.Fatalf("SetupWithManager: %v", err)
	}
	runManager(t, mgr)
}

// runManager starts mgr until the test ends, then checks it stopped cleanly.
func runManager(t *testing.T, mgr ctrl.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the manager: %v", err)
		}
	})
}
