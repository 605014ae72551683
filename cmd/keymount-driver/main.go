// Command keymount-driver is keymount's CSI node plugin. It serves the CSI
// Identity and Node services on a unix socket, for kubelet.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/cluster"
	"github.com/keymount/keymount/cluster/secretobjects"
	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/registration"
	"github.com/keymount/keymount/driver/targetpath"
	"github.com/keymount/keymount/internal/cliflag"
	"github.com/keymount/keymount/internal/logredact"
	"github.com/keymount/keymount/internal/metrics"
	"github.com/keymount/keymount/provider/providerclient"
	"github.com/keymount/keymount/rotation"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// The API client's default rate limits fit a node: every pod that starts
// costs one write (two with secretObjects) and every pod that ends one, so
// a node where 250 pods start together writes at once, and a steady churn
// of 50 a second never waits. client-go's own defaults (5 a second, 10 at
// once) made 100 pods wait 20 s for their statuses.
const (
	defaultKubeQPS   = 50
	defaultKubeBurst = 250
)

// config is every flag of the binary.
type config struct {
	driver          driver.Config
	additionalDirs  string
	providerTimeout time.Duration
	// releaseMemoryAfter is --release-memory-after; 0 turns it off.
	releaseMemoryAfter time.Duration
	// rotation is --enable-secret-rotation and --rotation-poll-interval.
	rotation        rotation.NodeDefaults
	backoff         rotation.Backoff
	providerMaxRecv int
	stateDir        string
	tmpfsSize       string
	// tmpfsBytes and inflight are --tmpfs-size and
	// --provider-inflight-bytes in bytes, as checkFlags read them.
	tmpfsBytes    int64
	inflight      int64
	classPaths    string
	kubeconfig    string
	kubeQPS       float64
	kubeBurst     int
	syncSecrets   syncMode
	healthAddr    string
	metricsAddr   string
	inflightBytes string
	registration  registration.Config
	upstream      *upstream
}

func main() {
	cfg, err := parseFlags(flag.NewFlagSet("keymount-driver", flag.ContinueOnError), os.Args[1:])
	if err != nil {
		os.Exit(cliflag.ExitCode(err)) // Parse printed the usage, or one line naming the mistake.
	}
	if cfg.upstream.version {
		fmt.Println("keymount-driver", version)
		return
	}
	logredact.Install() // no HTTP body (Secrets, tokens) in any log, at any -v
	cfg.upstream.applyLogFormat()
	cfg.upstream.ignored.Log()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, cfg)
	stop()
	if err != nil {
		klog.ErrorS(err, "keymount-driver stopped")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// parseFlags binds every flag into a config and parses args (see
// cliflag.Parse for what a mistake or --help prints).
func parseFlags(fs *flag.FlagSet, args []string) (*config, error) {
	host, _ := os.Hostname()
	cfg := &config{}
	klog.InitFlags(fs)
	fs.StringVar(&cfg.driver.Endpoint, "endpoint", "unix:///csi/csi.sock", "CSI endpoint (unix socket)")
	fs.StringVar(&cfg.driver.DriverName, "driver-name", driver.DefaultDriverName, "CSI driver name pods use in their volumes")
	fs.StringVar(&cfg.driver.NodeID, "node-id", host, "node ID reported to kubelet, usually the node name")
	fs.StringVar(&cfg.driver.ProviderDir, "provider-dir", "/var/run/secrets-store-csi-providers", "main directory of provider sockets <provider>.sock")
	fs.StringVar(&cfg.additionalDirs, "additional-provider-dirs", "/etc/kubernetes/secrets-store-csi-providers", "comma-separated provider socket directories searched before --provider-dir")
	fs.StringVar(&cfg.driver.KubeletRootDir, "kubelet-root-dir", targetpath.DefaultKubeletRoot, "kubelet's --root-dir: every target path must lie below it, in kubelet's layout")
	fs.IntVar(&cfg.driver.ProviderConcurrency, "provider-concurrency", driver.DefaultProviderConcurrency, "provider calls (and writes of their responses) running at once")
	fs.StringVar(&cfg.inflightBytes, "provider-inflight-bytes", resource.NewQuantity(driver.DefaultProviderInflightBytes, resource.BinarySI).String(), "provider response bytes held at once; each call reserves --provider-max-recv-size of it")
	fs.StringVar(&cfg.registration.Dir, "plugin-registration-dir", "", "kubelet's plugins_registry directory as the driver sees it: register with kubelet there (no node-driver-registrar sidecar needed); empty: off")
	fs.StringVar(&cfg.registration.Endpoint, "kubelet-registration-path", "/var/lib/kubelet/plugins/csi-secrets-store/csi.sock", "the CSI socket as kubelet sees it on the host, announced with --plugin-registration-dir")
	fs.StringVar(&cfg.healthAddr, "health-addr", "", "address serving /healthz and /readyz over HTTP (e.g. :9809); empty: off")
	fs.StringVar(&cfg.metricsAddr, "metrics-addr", defaultMetricsAddr, "address serving Prometheus metrics on /metrics, and /healthz and /readyz, over HTTP (upstream's flag and default); empty: off")
	fs.BoolVar(&cfg.rotation.Enabled, "enable-secret-rotation", false, "refresh mounted volumes (upstream's switch): off, a volume keeps what its first publish mounted")
	fs.DurationVar(&cfg.backoff.Initial, "rotation-backoff-initial", rotation.DefaultBackoffInitial, "after a refresh fails, wait this long before the next attempt (the old files stay mounted); doubles with each failure in a row")
	fs.DurationVar(&cfg.backoff.Max, "rotation-backoff-max", rotation.DefaultBackoffMax, "the longest wait between attempts of a failing refresh")
	fs.DurationVar(&cfg.driver.MinRefreshInterval, "min-refresh-interval", driver.DefaultMinRefreshInterval, "shortest time between two refreshes of one volume started by refresh triggers (keymount.io/refresh on a class or pod): a burst of triggers is one refresh, a later one waits for the rest of the interval")
	fs.DurationVar(&cfg.rotation.Interval, "rotation-poll-interval", rotation.DefaultInterval, "with --enable-secret-rotation, refresh a volume on the first republish kubelet sends (about every minute) once this long has passed since its provider last answered; 0: on every republish")
	fs.DurationVar(&cfg.releaseMemoryAfter, "release-memory-after", driver.DefaultReleaseMemoryAfter, "return freed memory to the node once no CSI call came for this long after some did (the garbage of a burst of pods); 0: never")
	fs.DurationVar(&cfg.providerTimeout, "provider-timeout", 60*time.Second, "deadline of one provider call; keep it below kubelet's 2 minutes")
	fs.IntVar(&cfg.providerMaxRecv, "provider-max-recv-size", 4<<20, "largest provider response accepted, in bytes")
	fs.StringVar(&cfg.stateDir, "state-dir", "/var/lib/keymount", "host directory (bidirectional mount propagation) holding each volume's tmpfs and record")
	fs.StringVar(&cfg.tmpfsSize, "tmpfs-size", "64Mi", "largest content of one volume, counted as tmpfs counts it (each file rounded up to whole 4 KiB pages); each volume's tmpfs holds two such generations")
	fs.StringVar(&cfg.classPaths, "class-path", "", "comma-separated SecretProviderClass YAML files or directories to resolve classes from, instead of the API server; a bad file fails only the volumes of the classes it holds")
	fs.StringVar(&cfg.kubeconfig, "kubeconfig", "", "kubeconfig of the API server; empty: in-cluster config when running in a pod")
	fs.Float64Var(&cfg.kubeQPS, "kube-api-qps", defaultKubeQPS, "API server requests a second, sustained, of each client (pod statuses, synced Secrets, events)")
	fs.IntVar(&cfg.kubeBurst, "kube-api-burst", defaultKubeBurst, "API server requests allowed at once above --kube-api-qps: the writes of that many pods starting together never wait")
	cfg.syncSecrets = syncAuto
	fs.Var(&cfg.syncSecrets, "sync-secrets", "mirror secretObjects into Kubernetes Secrets: true, false, or auto (the default): on when the driver's RBAC lets it list, watch, create and patch Secrets, as upstream syncs whenever its chart granted them (syncSecret.enabled)")
	cfg.upstream = addUpstreamFlags(fs, cfg)
	if err := cliflag.Parse(fs, args); err != nil {
		return nil, err
	}
	if err := checkFlags(cfg); err != nil {
		_, _ = fmt.Fprintln(fs.Output(), cliflag.Line(fs.Name(), err))
		return nil, err
	}
	cfg.driver.Version = version
	return cfg, nil
}

// checkFlags refuses values the flag types accept but the driver cannot
// use, before it starts, and reads the sizes.
func checkFlags(cfg *config) error {
	if err := checkUpstreamFlags(cfg); err != nil {
		return err
	}
	size, err := resource.ParseQuantity(cfg.tmpfsSize)
	if err != nil || size.Value() <= 0 {
		return fmt.Errorf("--tmpfs-size %q: want a positive size such as 32Mi", cfg.tmpfsSize)
	}
	inflight, err := resource.ParseQuantity(cfg.inflightBytes)
	if err != nil || inflight.Value() <= 0 {
		return fmt.Errorf("--provider-inflight-bytes %q: want a positive size such as 64Mi", cfg.inflightBytes)
	}
	cfg.tmpfsBytes, cfg.inflight = size.Value(), inflight.Value()
	return nil
}

func run(ctx context.Context, cfg *config) error {
	volumes, err := driver.NewVolumeManager(cfg.stateDir, cfg.tmpfsBytes)
	if err != nil {
		return err
	}
	cfg.driver.ProviderInflightBytes = cfg.inflight
	cfg.driver.ReleaseMemoryAfter = cfg.releaseMemoryAfter
	if cfg.releaseMemoryAfter <= 0 {
		cfg.driver.ReleaseMemoryAfter = -1 // off
	}
	cfg.driver.ProviderMaxRecvBytes = int64(cfg.providerMaxRecv)
	providers, err := providerclient.New(providerclient.Config{
		Dirs:           append(splitList(cfg.additionalDirs), cfg.driver.ProviderDir),
		Timeout:        cfg.providerTimeout,
		MaxRecvMsgSize: cfg.providerMaxRecv,
	})
	if err != nil {
		return err
	}
	defer func() { _ = providers.Close() }()
	if cfg.rotation.Interval < 0 {
		return fmt.Errorf("--rotation-poll-interval %s: want a duration of 0 or more such as 2m", cfg.rotation.Interval)
	}
	if cfg.backoff.Initial <= 0 || cfg.backoff.Max < cfg.backoff.Initial {
		return fmt.Errorf("--rotation-backoff-initial %s, --rotation-backoff-max %s: want an initial wait above 0 and a maximum at least as long",
			cfg.backoff.Initial, cfg.backoff.Max)
	}
	decider := &rotation.Decider{Node: cfg.rotation, Backoff: cfg.backoff}
	deps := driver.Deps{Providers: providers, Volumes: volumes, Refresh: decider}
	m := newMetrics(cfg, &deps, providers.Found)
	dc, err := connect(ctx, cfg, &deps, m)
	if err != nil {
		return err
	}
	d, err := driver.New(cfg.driver, deps)
	if err != nil {
		return err
	}
	if dc != nil {
		decider.Source = dc
		dc.HandleTriggers(d, cfg.rotation)
	}
	stopPprof, err := cfg.upstream.servePprof(ctx)
	if err != nil {
		return err
	}
	defer stopPprof()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	checks := register(ctx, cfg, cancel)
	stopHTTP, err := serveEndpoints(ctx, cfg, m, d, checks)
	if err != nil {
		return err
	}
	defer stopHTTP()
	if err := d.Run(ctx); err != nil {
		return err
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// register registers the driver with kubelet when --plugin-registration-dir
// asks, in the background until ctx ends (a failure cancels ctx), and
// returns the health check of the registration: a refused or missing
// registration fails /healthz.
func register(ctx context.Context, cfg *config, cancel context.CancelCauseFunc) []driver.HealthCheck {
	if cfg.registration.Dir == "" {
		return nil
	}
	cfg.registration.DriverName = cfg.driver.DriverName
	status := &registration.Status{}
	go func() {
		if err := registration.Serve(ctx, cfg.registration, status); err != nil {
			cancel(err)
		}
	}()
	return []driver.HealthCheck{status.Check}
}

// serveHealth serves h on addr until the returned func is called.
func serveHealth(ctx context.Context, addr string, h http.Handler) (func(), error) {
	return serveHTTP(ctx, "--health-addr", addr, "health checks", h)
}

// serveHTTP serves h on addr until the returned func is called; setting
// names the flag that chose addr, what names the service in the log.
func serveHTTP(ctx context.Context, setting, addr, what string, h http.Handler) (func(), error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", setting, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "HTTP server stopped", "serving", what)
		}
	}()
	klog.InfoS("serving "+what, "addr", l.Addr().String())
	return func() { _ = srv.Close() }, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// restConfig is the API server connection of --kubeconfig (or the pod's),
// with the driver's user agent and rate limits.
func restConfig(cfg *config) (*rest.Config, error) {
	if cfg.kubeQPS <= 0 || cfg.kubeBurst <= 0 {
		return nil, fmt.Errorf("--kube-api-qps %v and --kube-api-burst %d: want positive numbers such as %d and %d",
			cfg.kubeQPS, cfg.kubeBurst, defaultKubeQPS, defaultKubeBurst)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load API server config: %w", err)
	}
	rc.UserAgent = "keymount-driver/" + version
	rc.QPS, rc.Burst = float32(cfg.kubeQPS), cfg.kubeBurst
	return rc, nil
}

// connect picks where classes come from and whether the driver reports to an
// API server: a kubeconfig or an in-cluster config means a cluster; class
// files alone mean none.
func connect(ctx context.Context, cfg *config, deps *driver.Deps, m *metrics.Metrics) (*cluster.Lazy, error) {
	inCluster := os.Getenv("KUBERNETES_SERVICE_HOST") != ""
	if cfg.kubeconfig == "" && !inCluster {
		if cfg.classPaths == "" {
			return nil, errors.New("no API server and no --class-path: set --kubeconfig, run in a cluster, or name class files with --class-path")
		}
		if cfg.syncSecrets == syncOn {
			return nil, errors.New("--sync-secrets needs an API server: set --kubeconfig or run in a cluster")
		}
		deps.Classes = &class.FileResolver{Paths: splitList(cfg.classPaths)}
		return nil, nil
	}
	rc, err := restConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The socket serves before the API server answers (start-up must not
	// wait for it, nor fail when it is down): see cluster.Lazy. The
	// metrics, when on, hear the Secret sync's writes.
	var writes secretobjects.WriteObserver
	if m != nil {
		writes = m
	}
	cl := cluster.ConnectInBackground(ctx, cluster.Config{
		Rest: rc, Node: cfg.driver.NodeID, DriverName: cfg.driver.DriverName,
		SyncSecrets: cfg.syncSecrets == syncOn, SyncSecretsAuto: cfg.syncSecrets == syncAuto,
	}, writes)
	deps.Cluster = cl
	deps.Classes = cl
	if cfg.classPaths != "" {
		deps.Classes = &class.FileResolver{Paths: splitList(cfg.classPaths)}
	}
	return cl, nil
}
