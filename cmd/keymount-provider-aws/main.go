// Command keymount-provider-aws is keymount's AWS provider plugin: it serves
// Secrets Manager secrets and SSM parameters to the Secrets Store CSI driver
// over <provider-dir>/<name>.sock, for classes written for the existing AWS
// provider.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/internal/cliflag"
	"github.com/keymount/keymount/internal/metrics"
	"github.com/keymount/keymount/internal/pprofserve"
	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/provider/aws"
	"github.com/keymount/keymount/provider/aws/identity"
	"github.com/keymount/keymount/provider/aws/kubeclient"
	"github.com/keymount/keymount/provider/aws/noderegion"
	"github.com/keymount/keymount/provider/aws/push"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/provider/providercmd"
	"github.com/keymount/keymount/provider/server"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// config is every flag of the binary.
type config struct {
	// probe is --probe and --probe-timeout: probe the provider serving
	// on the socket, then exit.
	probe providercmd.Probe
	// metricsAddr is --metrics-addr; "" serves none.
	metricsAddr string
	// printVersion is --version: print the version and exit.
	printVersion bool
	server       server.Config
	region       string
	nodeName     string
	kubeconfig   string
	endpoint     string
	stsURL       string
	freshness    time.Duration
	maxListedAge time.Duration
	saTTL        time.Duration

	podIdentityTimeout time.Duration
	enablePprof        bool
	pprofPort          int
	upstream           *upstream
}

func main() {
	cfg, err := parseFlags(flag.NewFlagSet("keymount-provider-aws", flag.ContinueOnError), os.Args[1:])
	if err != nil {
		os.Exit(cliflag.ExitCode(err)) // Parse printed the usage, or one line naming the mistake.
	}
	if cfg.probe.On { // the container's liveness and readiness probe
		os.Exit(cfg.probe.Run(os.Stderr, "keymount-provider-aws", cfg.server))
	}
	os.Exit(providercmd.Main("keymount-provider-aws", version, cfg.printVersion, func(ctx context.Context) error {
		cfg.upstream.ignored.Log()
		return run(ctx, cfg)
	}))
}

// parseFlags binds every flag into a config and parses args (see
// cliflag.Parse for what a mistake or --help prints).
func parseFlags(fs *flag.FlagSet, args []string) (*config, error) {
	cfg := &config{}
	klog.InitFlags(fs)
	fs.StringVar(&cfg.server.SocketDir, "provider-dir", "/var/run/secrets-store-csi-providers", "directory of provider sockets the driver searches")
	fs.StringVar(&cfg.server.Name, "name", "aws", "provider name, as in SecretProviderClass spec.provider")
	fs.StringVar(&cfg.region, "region", os.Getenv("AWS_REGION"), "region of every class without a region parameter; empty: the region label of the pod's node (default $AWS_REGION, which the existing provider also prefers to the node's label)")
	fs.StringVar(&cfg.nodeName, "node-name", os.Getenv("NODE_NAME"), "the node the provider runs on, whose region label serves classes without a region; empty: read each such pod for its node (default $NODE_NAME)")
	fs.StringVar(&cfg.kubeconfig, "kubeconfig", "", "kubeconfig for reading service accounts; empty: in-cluster config")
	fs.StringVar(&cfg.endpoint, "aws-endpoint", "", "base endpoint of Secrets Manager and SSM (testing against a local endpoint); empty: AWS")
	fs.StringVar(&cfg.stsURL, "sts-endpoint", "", "base endpoint of STS (testing); empty: AWS")
	fs.StringVar(&cfg.metricsAddr, "metrics-addr", "", "address serving Prometheus metrics on /metrics over HTTP (store requests by operation and outcome, cache hits, credential requests), e.g. :8097; empty: off")
	fs.DurationVar(&cfg.freshness, "freshness", 30*time.Second, "how long a fetched latest value is shared by the pods of one identity")
	fs.DurationVar(&cfg.maxListedAge, "max-listed-age", store.DefaultMaxListedAge, "how long a latest (or staging-label) Secrets Manager value may be kept on ListSecrets' word alone before it is read again (ListSecrets is eventually consistent); 0: no revalidation by ListSecrets, every stale value is read again")
	fs.DurationVar(&cfg.saTTL, "service-account-ttl", 5*time.Minute, "how long a service account's role annotation is cached")
	fs.BoolVar(&cfg.enablePprof, "enable-pprof", false, "serve Go's pprof handlers on 127.0.0.1:--pprof-port (as keymount-driver's flag)")
	fs.IntVar(&cfg.pprofPort, "pprof-port", 6066, "port of the pprof endpoint on 127.0.0.1")
	cfg.upstream = addUpstreamFlags(fs, cfg)
	cfg.probe.AddFlags(fs)
	fs.BoolVar(&cfg.printVersion, "version", false, "print the version and exit")
	if err := cliflag.Parse(fs, args); err != nil {
		return nil, err
	}
	cfg.server.Version = version
	return cfg, nil
}

func run(ctx context.Context, cfg *config) error {
	// The one Kubernetes client: service accounts, and the node (or pods)
	// for the default region.
	cs, err := kubeclient.New(kubeclient.Config{Kubeconfig: cfg.kubeconfig, QPS: cfg.upstream.qps, Burst: cfg.upstream.burst,
		UserAgent: "keymount-provider-aws/" + version})
	if err != nil {
		return err
	}
	if cfg.enablePprof {
		stop, _, err := pprofserve.Serve(ctx, cfg.pprofPort)
		if err != nil {
			return err
		}
		defer stop()
	}
	// The standard AWS environment configures the SDK (FIPS, dual-stack,
	// AWS_ENDPOINT_URL_*, AWS_CA_BUNDLE, ...); credentials always come
	// from the pod's identity, never from this configuration.
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithAppID(appID()))
	if err != nil {
		return fmt.Errorf("load the AWS SDK configuration from the environment: %w", err)
	}
	storeCfg := store.Config{AWS: awsCfg, Endpoint: cfg.endpoint, Freshness: cfg.freshness, MaxListedAge: cfg.maxListedAge}
	if cfg.maxListedAge <= 0 {
		storeCfg.MaxListedAge = -1 // off
	}
	idCfg := identity.Config{AWS: awsCfg, STSEndpoint: cfg.stsURL, PodIdentityTimeout: cfg.podIdentityTimeout}
	if cfg.metricsAddr != "" {
		m := metrics.NewAWS()
		storeCfg.Observer, idCfg.Observer = m, m
		stop, err := providercmd.ServeMetrics(ctx, cfg.metricsAddr, m.Handler())
		if err != nil {
			return err
		}
		defer stop()
	}
	st := store.New(storeCfg)
	// The store remembers a failing region for STS too.
	idCfg.Outages = st
	ids := identity.New(idCfg, identity.NewKubeServiceAccounts(cs, cfg.saTTL))
	regions := noderegion.New(noderegion.Config{Region: cfg.region, NodeName: cfg.nodeName}, cs)
	// Every mount's token is proven with the cluster's service account
	// issuer keys (read once through cs), or a TokenReview where discovery
	// is not readable, before any cache or store is used for it.
	tokens, err := satoken.New(satoken.Config{}, cs)
	if err != nil {
		return err
	}
	p, err := aws.New(regions, tokens, ids, st)
	if err != nil {
		return err
	}
	// keymount's push extension: PushSecrets' values written with the
	// identity of each PushSecret's ServiceAccount, proven as a mount's.
	if cfg.server.Pusher, err = aws.NewPusher(p, push.New(push.Config{AWS: awsCfg, Endpoint: cfg.endpoint})); err != nil {
		return err
	}
	return providercmd.Serve(ctx, cfg.server, p, "region", cfg.region, "node", cfg.nodeName)
}

// appID names the provider in the SDK's user agent (at most 50 characters).
func appID() string {
	id := "keymount-provider-aws-" + version
	if len(id) > 50 {
		id = id[:50]
	}
	return id
}
