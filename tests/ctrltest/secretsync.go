package ctrltest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/controller/synchash"
	"github.com/keymount/keymount/controller/tokens"
	"github.com/keymount/keymount/provider/providerclient"
)

// SyncController is keymount-controller's SecretSync reconciler, wired as
// the binary wires it: the manager's cache of secretsync.CacheOptions, a
// provider client over SocketDir, a token manager, the hash key Secret in
// the controller's namespace (Config.Pod.Namespace, which must exist) and
// metrics on a registry of its own.
type SyncController struct {
	Config secretsync.Config
	// SocketDir is the provider socket directory.
	SocketDir string
	// Workers is the reconciler's concurrency.
	Workers int
	// WrapProviders, when set, wraps the provider client (to count calls).
	WrapProviders func(secretsync.Providers) secretsync.Providers
}

// Start runs the reconciler against the API server of cfg until the test
// ends; scheme holds keymount's types.
func (s SyncController) Start(tb testing.TB, cfg *rest.Config, scheme *runtime.Scheme) {
	tb.Helper()
	cacheOpts, err := secretsync.CacheOptions(nil)
	if err != nil {
		tb.Fatal(err)
	}
	mgr := NewManager(tb, cfg, ctrl.Options{Scheme: scheme, Cache: cacheOpts})
	pc, err := providerclient.New(providerclient.Config{Dirs: []string{s.SocketDir}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = pc.Close() })
	var providers secretsync.Providers = pc
	if s.WrapProviders != nil {
		providers = s.WrapProviders(pc)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	toks, err := tokens.NewManager(cs.CoreV1(), tokens.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	hashes, err := synchash.NewKeySource(cs.CoreV1(), s.Config.Pod.Namespace)
	if err != nil {
		tb.Fatal(err)
	}
	metrics, err := secretsync.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	metrics.ProvidersFound(pc.Found)
	err = secretsync.SetupWithManager(tb.Context(), mgr, secretsync.Options{Config: s.Config, Workers: s.Workers, Deps: secretsync.Deps{
		Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Providers: providers, Tokens: toks, Hashes: hashes,
		Events: mgr.GetEventRecorder("keymount-controller"), Metrics: metrics,
	}})
	if err != nil {
		tb.Fatal(err)
	}
	Start(tb, mgr)
}
