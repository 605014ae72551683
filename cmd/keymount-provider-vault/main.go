// Command keymount-provider-vault is keymount's Vault and OpenBao provider
// plugin: it serves Vault secrets to the Secrets Store CSI driver over
// <provider-dir>/<name>.sock, for classes written for HashiCorp's
// vault-csi-provider (provider: vault).
package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/klog/v2"

	"github.com/keymount/keymount/internal/cliflag"
	"github.com/keymount/keymount/internal/metrics"
	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/provider/aws/kubeclient"
	"github.com/keymount/keymount/provider/providercmd"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/provider/vault"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// config is every flag of the binary.
type config struct {
	// probe is --probe and --probe-timeout: probe the provider serving
	// on the socket, then exit.
	probe        providercmd.Probe
	printVersion bool
	metricsAddr  string
	kubeconfig   string
	endpoint     string
	server       server.Config
	provider     vault.Config
	upstream     *upstream
}

func main() {
	cfg, err := parseFlags(flag.NewFlagSet("keymount-provider-vault", flag.ContinueOnError), os.Args[1:])
	if err != nil {
		os.Exit(cliflag.ExitCode(err)) // Parse printed the usage, or one line naming the mistake.
	}
	if cfg.probe.On { // the container's liveness and readiness probe
		os.Exit(cfg.probe.Run(os.Stderr, "keymount-provider-vault", cfg.server))
	}
	os.Exit(providercmd.Main("keymount-provider-vault", version, cfg.printVersion, func(ctx context.Context) error {
		cfg.upstream.ignored.Log()
		ignoreEnvironmentToken()
		return run(ctx, cfg)
	}))
}

// ignoreEnvironmentToken drops VAULT_TOKEN from the environment: every
// login is a pod's (or a SecretSync's), proven by its service account token,
// never the provider's own.
func ignoreEnvironmentToken() {
	if _, ok := os.LookupEnv("VAULT_TOKEN"); ok {
		klog.InfoS("VAULT_TOKEN is set and ignored: every Vault login uses the mounting pod's service account token")
		_ = os.Unsetenv("VAULT_TOKEN")
	}
}

// parseFlags binds every flag into a config and parses args (see
// cliflag.Parse for what a mistake or --help prints).
func parseFlags(fs *flag.FlagSet, args []string) (*config, error) {
	cfg := &config{}
	klog.InitFlags(fs)
	fs.StringVar(&cfg.server.SocketDir, "provider-dir", "/var/run/secrets-store-csi-providers", "directory of provider sockets the driver searches")
	fs.StringVar(&cfg.server.Name, "name", "vault", "provider name, as in SecretProviderClass spec.provider")
	fs.StringVar(&cfg.kubeconfig, "kubeconfig", "", "kubeconfig for reading the service account issuer keys (or TokenReviews); empty: in-cluster config")
	fs.StringVar(&cfg.metricsAddr, "metrics-addr", "", "address serving Prometheus metrics on /metrics over HTTP (Vault requests by operation and outcome), e.g. :8098; empty: off")
	fs.DurationVar(&cfg.provider.ReissueMargin, "reissue-margin", vault.DefaultReissueMargin, "a lease (or the login it was issued with) that cannot be renewed past its end is issued again this long before it ends (at most a third of its TTL before)")
	fs.DurationVar(&cfg.provider.VolumeIdle, "volume-idle", vault.DefaultVolumeIdle, "a volume not mounted or refreshed for this long is gone (keymount's driver tells of an unpublish at once; this is the fallback for the upstream driver and for a driver killed before it told): its identity's login is revoked with its last volume; keep it above the driver's --rotation-poll-interval")
	fs.DurationVar(&cfg.provider.MaintainEvery, "maintain-interval", vault.DefaultMaintainEvery, "how often logins and leases are renewed and idle volumes dropped")
	cfg.upstream = addUpstreamFlags(fs, cfg)
	cfg.probe.AddFlags(fs)
	fs.BoolVar(&cfg.printVersion, "version", false, "print the version and exit")
	if err := cliflag.Parse(fs, args); err != nil {
		return nil, err
	}
	if cfg.endpoint != "" {
		// vault-csi-provider's -endpoint is the socket path itself.
		cfg.server.SocketDir = filepath.Dir(cfg.endpoint)
		cfg.server.Name = strings.TrimSuffix(filepath.Base(cfg.endpoint), ".sock")
	}
	cfg.server.Version = version
	return cfg, nil
}

func run(ctx context.Context, cfg *config) error {
	cs, err := kubeclient.New(kubeclient.Config{Kubeconfig: cfg.kubeconfig, QPS: kubeclient.DefaultQPS, Burst: kubeclient.DefaultBurst,
		UserAgent: "keymount-provider-vault/" + version})
	if err != nil {
		return err
	}
	// Every mount's token is proven with the cluster's service account
	// issuer keys (read once), or a TokenReview where discovery is not
	// readable, before any login.
	tokens, err := satoken.New(satoken.Config{}, cs)
	if err != nil {
		return err
	}
	if cfg.metricsAddr != "" {
		m := metrics.NewVault()
		cfg.provider.Observer = m
		stop, err := providercmd.ServeMetrics(ctx, cfg.metricsAddr, m.Handler())
		if err != nil {
			return err
		}
		defer stop()
	}
	p, err := vault.New(cfg.provider, tokens)
	if err != nil {
		return err
	}
	go p.Run(ctx)
	// keymount's driver tells the provider of every unpublish: leases of
	// revokeOnUnpublish classes are revoked then, not once idle.
	cfg.server.Unpublisher = p
	// keymount-controller writes PushSecrets' values through it, logged
	// in as a mount of the same class and ServiceAccount would be.
	cfg.server.Pusher = p
	return providercmd.Serve(ctx, cfg.server, p, "vaultAddress", cfg.provider.Address)
}
