package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	pushv1alpha1 "github.com/keymount/keymount/apis/push/v1alpha1"
	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/pushsecret"
	"github.com/keymount/keymount/controller/reflector"
	"github.com/keymount/keymount/controller/restart"
	"github.com/keymount/keymount/controller/secretmirror"
	"github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/controller/synchash"
	"github.com/keymount/keymount/controller/telemetry"
	"github.com/keymount/keymount/controller/tokens"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/internal/logredact"
	"github.com/keymount/keymount/provider/providerclient"
)

// run serves SecretSyncs until ctx ends.
func run(ctx context.Context, cfg *config) error {
	ctrl.SetLogger(logredact.Logger(klog.Background()))
	rc, err := restConfig(cfg)
	if err != nil {
		return err
	}
	core, err := corev1client.NewForConfig(rc)
	if err != nil {
		return err
	}
	hashes, err := synchash.NewKeySource(core, cfg.namespace)
	if err != nil {
		return err
	}
	restartKey := restartHashKey(ctx, hashes)
	var digests *restart.SecretDigests
	if len(restartKey) > 0 {
		digests = restart.NewSecretDigests(restartKey)
	}
	mgr, err := newManager(cfg, rc, digests)
	if err != nil {
		return err
	}
	providers, err := providerclient.New(providerclient.Config{
		Dirs: []string{cfg.providerVolume}, Timeout: cfg.providerTimeout, MaxRecvMsgSize: cfg.maxRecvMsgSize,
	})
	if err != nil {
		return fmt.Errorf("--provider-volume: %w", err)
	}
	defer func() { _ = providers.Close() }()
	toks, err := tokens.NewManager(core, tokens.Config{})
	if err != nil {
		return err
	}
	m, err := telemetry.Register(crmetrics.Registry)
	if err != nil {
		return err
	}
	m.SecretSync.ProvidersFound(providers.Found)
	err = secretsync.SetupWithManager(ctx, mgr, secretsync.Options{Config: cfg.sync, Workers: cfg.workers, Deps: secretsync.Deps{
		Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Providers: providers, Tokens: toks,
		Hashes: hashes, Events: mgr.GetEventRecorder("keymount-controller"), Metrics: m.SecretSync,
	}})
	if err != nil {
		return err
	}
	// Secret restarts read the synced Secrets in the reconciler's cache,
	// their digests recorded as they enter it (newManager).
	if err := restart.SetupWithManager(ctx, mgr, restart.Options{HashKey: restartKey, SecretCache: mgr.GetCache(), SecretDigests: digests}); err != nil {
		return err
	}
	if err := setupPushSecrets(ctx, mgr, cfg, providers, toks, m); err != nil {
		return err
	}
	if cfg.enableFanout {
		if err := setupFanout(ctx, mgr, cfg, toks, m); err != nil {
			return err
		}
	}
	klog.InfoS("starting", "version", version, "providerVolume", cfg.providerVolume, "audiences", len(cfg.sync.Audiences),
		"rotationPollInterval", cfg.sync.PollInterval, "leaderElect", cfg.leaderElect, "namespace", cfg.namespace,
		"fanout", cfg.enableFanout)
	return mgr.Start(ctx)
}

// restartKeyLabel derives the key of restart's Secret digests from the
// syncHash key: the same on every replica and across restarts, and not the
// syncHash key itself.
const restartKeyLabel = "keymount.io/restart-on-change/v1"

// restartHashKey is the key of restart on change's Secret digests, derived
// from the syncHash key (restartKeyLabel); nil, turning Secret restarts off
// (volume restarts still run), when the syncHash key cannot be had.
func restartHashKey(ctx context.Context, hashes *synchash.KeySource) []byte {
	h, err := hashes.Hasher(ctx)
	if err != nil {
		klog.ErrorS(err, "restart on change for synced Secrets off: no syncHash key")
		return nil
	}
	return []byte(h.Sum(&synchash.Content{Type: restartKeyLabel}))
}

// setupFanout adds the fan-out reconcilers (--enable-fanout) on one shared
// cache of namespace metadata and copies (controller/fanout): reflector's
// annotations and SecretMirrors.
func setupFanout(ctx context.Context, mgr ctrl.Manager, cfg *config, toks secretmirror.TokenSource, m *telemetry.Metrics) error {
	c, err := fanout.NewCache(mgr)
	if err != nil {
		return err
	}
	writes, err := fanoutClient(mgr, cfg)
	if err != nil {
		return err
	}
	if err := reflector.SetupWithManager(ctx, mgr, reflector.Options{Cache: c, Workers: cfg.workers, Writes: writes, Metrics: m.Fanout}); err != nil {
		return err
	}
	return setupMirrors(ctx, mgr, cfg, c, writes, toks, m)
}

// fanoutClient is the client that writes the copies: uncached, with its
// own rate limit (--fanout-kube-api-qps, --fanout-kube-api-burst), so that a
// source copied into many namespaces neither waits on nor starves the
// SecretSync reconciler's requests.
func fanoutClient(mgr ctrl.Manager, cfg *config) (client.Client, error) {
	rc := rest.CopyConfig(mgr.GetConfig())
	rc.QPS, rc.Burst = float32(cfg.fanoutQPS), cfg.fanoutBurst
	rc.RateLimiter = nil
	c, err := client.New(rc, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("fan-out client: %w", err)
	}
	return c, nil
}

// setupPushSecrets adds PushSecrets (controller/pushsecret) when the API
// server serves their CRD (deploy/crds installs it); without it, they are
// off and the log says so.
func setupPushSecrets(ctx context.Context, mgr ctrl.Manager, cfg *config, providers *providerclient.Client, toks *tokens.Manager, m *telemetry.Metrics) error {
	gk := schema.GroupKind{Group: pushv1alpha1.GroupName, Kind: "PushSecret"}
	if _, err := mgr.GetRESTMapper().RESTMapping(gk, pushv1alpha1.Version); err != nil {
		if meta.IsNoMatchError(err) {
			klog.InfoS("PushSecrets off: the API server does not serve keymount.io/v1alpha1 (install deploy/crds/keymount.io_pushsecrets.yaml)")
			return nil
		}
		return fmt.Errorf("PushSecret CRD: %w", err)
	}
	return pushsecret.SetupWithManager(ctx, mgr, pushsecret.Options{Workers: cfg.workers, Deps: pushsecret.Deps{
		Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Events: mgr.GetEventRecorder("keymount-controller"),
		Providers: providers, Tokens: toks, Audiences: cfg.sync.Audiences, Pod: cfg.sync.Pod, Metrics: m.Push,
	}})
}

// setupMirrors adds SecretMirrors (controller/secretmirror) when the API server
// serves their CRD (deploy/crds installs it); without it, they are off and
// the log says so.
func setupMirrors(ctx context.Context, mgr ctrl.Manager, cfg *config, copies cache.Cache, writes client.Client, toks secretmirror.TokenSource, m *telemetry.Metrics) error {
	gk := schema.GroupKind{Group: mirrorsv1alpha2.GroupName, Kind: "SecretMirror"}
	if _, err := mgr.GetRESTMapper().RESTMapping(gk, mirrorsv1alpha2.Version); err != nil {
		if meta.IsNoMatchError(err) {
			klog.InfoS("SecretMirrors off: the API server does not serve mirrors.kts.studio/v1alpha2 (install deploy/crds/mirrors.kts.studio_secretmirrors.yaml)")
			return nil
		}
		return fmt.Errorf("SecretMirror CRD: %w", err)
	}
	return secretmirror.SetupWithManager(ctx, mgr, secretmirror.Options{Workers: cfg.workers, Deps: secretmirror.Deps{
		Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Copies: copies, Writes: writes,
		Events: mgr.GetEventRecorder("keymount-controller"),
		// Vault sources with auth.kubernetes: tokens for the audiences
		// --token-request-audience lists, as SecretSyncs get.
		Tokens: toks, Audiences: cfg.sync.Audiences, Metrics: m.Fanout, PushMetrics: m.Push,
	}})
}

// restConfig is the API server's configuration: --kubeconfig, else
// $KUBECONFIG, else in-cluster.
func restConfig(cfg *config) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if cfg.kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	} else {
		rc, err = ctrl.GetConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.UserAgent = "keymount-controller/" + version
	rc.QPS = float32(cfg.kubeQPS)
	rc.Burst = cfg.kubeBurst
	return rc, nil
}

// newManager builds the controller-runtime manager: Lease leader election,
// health probes, metrics, and a cache of SecretSyncs, classes and only the
// Secrets carrying the SecretSync label, so memory does not grow with the
// cluster's other Secrets.
func newManager(cfg *config, rc *rest.Config, digests *restart.SecretDigests) (ctrl.Manager, error) {
	scheme, err := kube.NewScheme()
	if err != nil {
		return nil, err
	}
	if err := mirrorsv1alpha2.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := pushv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	var annotate func(*corev1.Secret)
	if digests != nil {
		annotate = digests.Record
	}
	cacheOpts, err := secretsync.CacheOptions(annotate)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(rc, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: cfg.metricsAddr},
		HealthProbeBindAddress:  cfg.probeAddr,
		PprofBindAddress:        cfg.pprofAddr,
		LeaderElection:          cfg.leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: cfg.leaderElectionNamespace,
		// A replica that stops hands the Lease over at once.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOpts,
	})
	if err != nil {
		return nil, fmt.Errorf("controller manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}
