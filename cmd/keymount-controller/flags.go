package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/internal/cliflag"
	"github.com/keymount/keymount/provider/providerclient"
)

// Defaults of the sync controller's flags, as it sets them.
const (
	defaultProviderVolume = "/provider"
	defaultMaxRecvMsgSize = 4 * 1024 * 1024
	defaultMetricsAddr    = ":8085"
	defaultProbeAddr      = ":8081"
	defaultWorkers        = 10
	// leaderElectionID names the Lease: keymount-controller's own, so it
	// never shares one with a sync controller left running.
	leaderElectionID = "keymount-controller.secret-sync.x-k8s.io"
)

// config is every flag of the binary.
type config struct {
	printVersion bool
	kubeconfig   string
	// providerVolume is --provider-volume: the directory of provider
	// sockets (<name>.sock).
	providerVolume  string
	providerTimeout time.Duration
	maxRecvMsgSize  int
	audiences       audienceList
	sync            secretsync.Config
	workers         int
	// namespace is the controller's own: its Lease (unless
	// --leader-election-namespace) and its syncHash key Secret.
	namespace               string
	leaderElect             bool
	leaderElectionNamespace string
	metricsAddr             string
	probeAddr               string
	pprofAddr               string
	kubeQPS                 float64
	kubeBurst               int
	// fanoutQPS and fanoutBurst limit the fan-out's copy writes, on a
	// client of their own.
	fanoutQPS   float64
	fanoutBurst int
	// enableFanout is --enable-fanout: copy Secrets and ConfigMaps across
	// namespaces (reflector's annotations, SecretMirrors).
	enableFanout bool
}

// audienceList is --token-request-audience: repeatable, each a
// comma-separated list, as the sync controller's versions accept it.
type audienceList []string

func (a *audienceList) String() string { return strings.Join(*a, ",") }

func (a *audienceList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*a = append(*a, s)
		}
	}
	return nil
}

// parseFlags binds the flags into a config and checks it. getenv reads the
// downward-API variables naming the controller's pod. A mistake prints one
// line naming it and --help to fs's output, as cliflag.Parse does.
func parseFlags(fs *flag.FlagSet, args []string, getenv func(string) string) (*config, error) {
	cfg := &config{}
	klog.InitFlags(fs)
	fs.BoolVar(&cfg.printVersion, "version", false, "print the version and exit")
	fs.StringVar(&cfg.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, or $KUBECONFIG)")
	fs.StringVar(&cfg.providerVolume, "provider-volume", defaultProviderVolume, "directory of the provider sockets (<provider>.sock), shared with provider sidecars")
	fs.DurationVar(&cfg.providerTimeout, "provider-timeout", providerclient.DefaultTimeout, "deadline of one provider call")
	fs.IntVar(&cfg.maxRecvMsgSize, "max-call-recv-msg-size", defaultMaxRecvMsgSize, "maximum size in bytes of a provider's gRPC response")
	fs.Var(&cfg.audiences, "token-request-audience", "audience of the service-account tokens sent to providers; repeat it or give a comma-separated list (default: none, no tokens)")
	fs.DurationVar(&cfg.sync.PollInterval, "rotation-poll-interval", secretsync.DefaultPollInterval, "default refresh interval of a SecretSync (keymount.io/rotation-interval overrides it per object); 0s refreshes only on a trigger")
	fs.DurationVar(&cfg.sync.Backoff.Initial, "sync-backoff-initial", secretsync.DefaultSyncBackoffInitial, "wait after a failed sync before its retry; it doubles per failure")
	fs.DurationVar(&cfg.sync.Backoff.Max, "sync-backoff-max", secretsync.DefaultSyncBackoffMax, "longest wait between the retries of a failing sync")
	fs.IntVar(&cfg.workers, "workers", defaultWorkers, "SecretSyncs synced at once")
	fs.StringVar(&cfg.namespace, "namespace", "", "the controller's namespace (default: $"+syncrequest.EnvPodNamespace+")")
	fs.BoolVar(&cfg.leaderElect, "leader-elect", false, "elect a leader among the replicas with a Lease; only the leader syncs")
	fs.StringVar(&cfg.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: --namespace)")
	fs.StringVar(&cfg.metricsAddr, "metrics-bind-address", defaultMetricsAddr, "address of the /metrics endpoint; 0 turns it off")
	fs.StringVar(&cfg.probeAddr, "health-probe-bind-address", defaultProbeAddr, "address of the /healthz and /readyz endpoints; 0 turns them off")
	fs.StringVar(&cfg.pprofAddr, "pprof-bind-address", "", "address of the Go pprof endpoints (/debug/pprof/), for diagnosing memory and CPU; empty or 0 turns them off (the default: profiles show object names, so bind it to loopback)")
	fs.Float64Var(&cfg.kubeQPS, "kube-api-qps", 50, "API requests per second the controller may send")
	fs.IntVar(&cfg.kubeBurst, "kube-api-burst", 100, "API requests the controller may send at once")
	fs.Float64Var(&cfg.fanoutQPS, "fanout-kube-api-qps", 500, "API requests per second the fan-out (--enable-fanout) may send to write copies, beside --kube-api-qps: one request a copy, so 1,000 namespaces take 2 s at 500")
	fs.IntVar(&cfg.fanoutBurst, "fanout-kube-api-burst", 1000, "copy writes the fan-out may send at once")
	fs.BoolVar(&cfg.enableFanout, "enable-fanout", false, "copy Secrets and ConfigMaps across namespaces as reflector's annotations and mirrors.kts.studio SecretMirrors ask (needs the fan-out RBAC: chart controller.fanout.enabled)")
	if err := cliflag.Parse(fs, args); err != nil {
		return nil, err
	}
	if cfg.printVersion {
		return cfg, nil
	}
	cfg.sync.Pod = syncrequest.PodFromEnv(getenv)
	cfg.sync.Audiences = cfg.audiences
	if cfg.namespace == "" {
		cfg.namespace = cfg.sync.Pod.Namespace
	}
	if cfg.leaderElectionNamespace == "" {
		cfg.leaderElectionNamespace = cfg.namespace
	}
	if err := cfg.check(); err != nil {
		_, _ = fmt.Fprintln(fs.Output(), cliflag.Line(fs.Name(), err))
		return nil, err
	}
	return cfg, nil
}

func (c *config) check() error {
	switch {
	case c.namespace == "":
		return fmt.Errorf("--namespace is empty and $%s is unset: name the controller's namespace (its syncHash key Secret lives there)", syncrequest.EnvPodNamespace)
	case c.providerVolume == "":
		return errors.New("--provider-volume is empty: name the directory of the provider sockets")
	case c.maxRecvMsgSize <= 0:
		return fmt.Errorf("--max-call-recv-msg-size %d: use a positive size in bytes", c.maxRecvMsgSize)
	case c.providerTimeout <= 0:
		return fmt.Errorf("--provider-timeout %s: use a positive duration", c.providerTimeout)
	case c.fanoutQPS <= 0 || c.fanoutBurst <= 0:
		return fmt.Errorf("--fanout-kube-api-qps %g and --fanout-kube-api-burst %d: use positive values", c.fanoutQPS, c.fanoutBurst)
	case c.workers <= 0:
		return fmt.Errorf("--workers %d: use 1 or more", c.workers)
	}
	return nil
}
