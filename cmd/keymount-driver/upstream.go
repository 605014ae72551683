package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	logsapi "k8s.io/component-base/logs/api/v1"
	logsjson "k8s.io/component-base/logs/json"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/internal/ignoredflags"
	"github.com/keymount/keymount/internal/logredact"
	"github.com/keymount/keymount/internal/pprofserve"
)

// upstream holds the flags of the upstream Secrets Store CSI Driver (v1.6)
// that keymount accepts so that its manifests and Helm values run
// unchanged. Flags with a keymount equivalent are aliases of it (they share
// the variable, so either name works); the rest are handled here.
type upstream struct {
	version       bool
	logFormatJSON bool
	enablePprof   bool
	pprofPort     int
	// metricsBackend is --metrics-backend: Prometheus, the only one.
	metricsBackend string
	// fs is the flag set, for klog's -v.
	fs *flag.FlagSet
	// ignored are the upstream flags keymount does not need.
	ignored *ignoredflags.Set
}

// ignoredUpstreamFlags are upstream flags keymount does not need (yet),
// with why. They are accepted, so upstream's manifests start, and each is
// logged once when given.
var ignoredUpstreamFlags = map[string]ignoredflags.Flag{
	"filtered-watch-secret": {Usage: "upstream (removed in v1.x): watch only labelled nodePublishSecretRef Secrets",
		Why: "kubelet reads the nodePublishSecretRef Secret and sends it with the request; keymount watches no such Secret", Bool: true},
}

// addUpstreamFlags registers upstream's flag names on fs: aliases of
// keymount's flags in cfg (call it after they are registered, with the
// same defaults) and upstream's own.
func addUpstreamFlags(fs *flag.FlagSet, cfg *config) *upstream {
	u := &upstream{fs: fs}
	fs.StringVar(&cfg.driver.DriverName, "drivername", cfg.driver.DriverName, "upstream's name of --driver-name")
	fs.StringVar(&cfg.driver.NodeID, "nodeid", cfg.driver.NodeID, "upstream's name of --node-id")
	fs.StringVar(&cfg.driver.ProviderDir, "provider-volume", cfg.driver.ProviderDir, "upstream's name of --provider-dir")
	fs.StringVar(&cfg.additionalDirs, "additional-provider-volume-paths", cfg.additionalDirs, "upstream's name of --additional-provider-dirs")
	fs.IntVar(&cfg.providerMaxRecv, "max-call-recv-msg-size", cfg.providerMaxRecv, "upstream's name of --provider-max-recv-size")
	fs.BoolVar(&cfg.driver.ProviderHealthCheckAll, "provider-health-check", false, "also check the providers called since start (not only those of mounted volumes) and log every failed check, as upstream's switch did")
	fs.DurationVar(&cfg.driver.ProviderHealthInterval, "provider-health-check-interval", driver.DefaultProviderHealthInterval, "how often every provider a mounted volume uses is asked for its Version; Probe and /readyz are not ready while one does not answer")
	fs.StringVar(&u.metricsBackend, "metrics-backend", "Prometheus", "metrics exporter (upstream's flag): Prometheus, the only one, served on --metrics-addr")
	fs.BoolVar(&u.version, "version", false, "print the version and exit")
	fs.BoolVar(&u.logFormatJSON, "log-format-json", false, "log as JSON lines (Kubernetes' json log format)")
	fs.BoolVar(&u.enablePprof, "enable-pprof", false, "serve Go's pprof handlers on 127.0.0.1:--pprof-port")
	fs.IntVar(&u.pprofPort, "pprof-port", 6065, "port of the pprof endpoint on 127.0.0.1")
	u.ignored = ignoredflags.Register(fs, ignoredUpstreamFlags)
	return u
}

// checkUpstreamFlags refuses what upstream's flags may not say in keymount:
// a metrics backend other than Prometheus, a health check interval that is
// not positive (upstream's ticker panics on it).
func checkUpstreamFlags(cfg *config) error {
	if err := cfg.upstream.checkMetricsBackend(); err != nil {
		return err
	}
	if cfg.driver.ProviderHealthInterval <= 0 {
		return fmt.Errorf("--provider-health-check-interval %s: want a positive duration such as 2m", cfg.driver.ProviderHealthInterval)
	}
	return nil
}

// checkMetricsBackend accepts Prometheus, in any case, as upstream does,
// and refuses any other backend.
func (u *upstream) checkMetricsBackend() error {
	if !strings.EqualFold(u.metricsBackend, "prometheus") {
		return fmt.Errorf("--metrics-backend %q: keymount exports Prometheus metrics only: set --metrics-backend=prometheus or drop the flag", u.metricsBackend)
	}
	return nil
}

// applyLogFormat switches klog to Kubernetes' JSON format when asked, at
// the -v the command line set. klog hands contextual logging calls (those
// of client-go among them) straight to that logger, past klog's own filter,
// so the logger itself redacts (internal/logredact.Logger).
func (u *upstream) applyLogFormat() {
	if !u.logFormatJSON {
		return
	}
	l, ctrl := logsjson.NewJSONLogger(logsapi.VerbosityLevel(u.verbosity()),
		logsjson.AddNopSync(os.Stderr), nil, nil)
	opts := []klog.LoggerOption{klog.ContextualLogger(true)}
	if ctrl.Flush != nil {
		opts = append(opts, klog.FlushLogger(ctrl.Flush))
	}
	klog.SetLoggerWithOptions(logredact.Logger(l), opts...)
}

// verbosity is klog's -v as the command line set it.
func (u *upstream) verbosity() uint32 {
	f := u.fs.Lookup("v")
	if f == nil {
		return 0
	}
	v, err := strconv.ParseUint(f.Value.String(), 10, 32)
	if err != nil {
		return 0
	}
	return uint32(v)
}

// servePprof serves Go's pprof handlers on 127.0.0.1 when --enable-pprof
// asks, until the returned func is called.
func (u *upstream) servePprof(ctx context.Context) (func(), error) {
	if !u.enablePprof {
		return func() {}, nil
	}
	stop, _, err := pprofserve.Serve(ctx, u.pprofPort)
	return stop, err
}
