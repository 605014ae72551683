package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/grpcrecover"
	"github.com/keymount/keymount/internal/unixsocket"
	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/rotation"
)

// ProviderClient calls provider plugins. *providerclient.Client implements it.
type ProviderClient interface {
	Mount(ctx context.Context, provider string, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error)
	// Version asks provider which runtime it is: the health check's call.
	Version(ctx context.Context, provider string) (*v1alpha1.VersionResponse, error)
	// Unpublish tells provider, through keymount's provider extension,
	// that a volume it served is unmounted. Providers without the
	// extension answer codes.Unimplemented.
	Unpublish(ctx context.Context, provider string, req *keymountv1.UnpublishRequest) error
}

// Deps are the driver's collaborators, given rather than built so tests and
// the CLI can choose them.
type Deps struct {
	Classes   class.Resolver
	Providers ProviderClient
	Volumes   *volume.Manager
	Clock     clock.PassiveClock
	// Cluster is optional: without it nothing is written to an API server.
	Cluster Cluster
	// Refresh decides whether a republish refreshes a mounted volume;
	// nil refreshes on every republish.
	Refresh RefreshPolicy
	// Metrics hears what the driver does; nil for none.
	Metrics Metrics
	// TriggerClock schedules the triggered refreshes that
	// Config.MinRefreshInterval defers; the real clock when nil.
	TriggerClock clock.WithDelayedExecution
}

// RefreshPolicy decides whether a republish, or a trigger, refreshes a
// mounted volume (calls its provider). A republish that is not due only
// makes sure the target still shows the volume: no provider call, no API
// request. *rotation.Decider implements it.
type RefreshPolicy interface {
	// Decide decides for the volume whose record says s.
	Decide(s rotation.State, podNamespace, podName, className string, now time.Time) rotation.Decision
	// Current returns the trigger values now set and the class's invalid
	// annotations, for a first publish.
	Current(podNamespace, podName, className string) (rotation.Triggers, []error)
}

// Driver is the CSI node plugin.
type Driver struct {
	cfg      Config
	deps     Deps
	serving  atomic.Bool
	locks    volumeLocks
	slots    *slots
	health   *providerHealth
	reporter *reporter
	idle     *idleRelease
	held     heldRequests
	// base is the context of refreshes the driver starts itself
	// (triggers): Run's.
	base atomic.Pointer[context.Context]
}

// New validates cfg and returns a Driver.
func New(cfg Config, deps Deps) (*Driver, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if deps.Classes == nil || deps.Providers == nil || deps.Volumes == nil {
		return nil, errors.New("driver needs a class resolver, a provider client and a volume manager")
	}
	if deps.Clock == nil {
		deps.Clock = clock.RealClock{}
	}
	if deps.Metrics == nil {
		deps.Metrics = noMetrics{}
	}
	if deps.TriggerClock == nil {
		deps.TriggerClock = clock.RealClock{}
	}
	providers := deps.Providers
	health := &providerHealth{
		interval: cfg.ProviderHealthInterval, timeout: providerVersionTimeout, checkAll: cfg.ProviderHealthCheckAll, used: deps.Volumes.Providers,
		version: func(ctx context.Context, p string) error { _, err := providers.Version(ctx, p); return err },
	}
	deps.Providers = observedProviders{ProviderClient: providers, h: health}
	d := &Driver{
		cfg: cfg, deps: deps, locks: volumeLocks{held: map[string]struct{}{}},
		held:  heldRequests{m: map[string]*heldRequest{}, clock: deps.TriggerClock, minInterval: cfg.MinRefreshInterval},
		slots: newSlots(cfg), health: health, reporter: newReporter(deps.Cluster, cfg.ReportTimeout),
		idle: newIdleRelease(cfg.ReleaseMemoryAfter, clock.RealClock{}),
	}
	d.held.start = d.startTriggered
	return d, nil
}

// NewVolumeManager is a convenience for callers wiring a real node.
func NewVolumeManager(stateDir string, sizeBytes int64) (*volume.Manager, error) {
	return volume.NewManager(stateDir, sizeBytes)
}

// Run removes the volumes no target shows any more and the provider stages
// a killed driver left, then listens on the configured endpoint and serves
// until ctx is done. A socket another
// instance still serves on is never removed: Run fails instead.
func (d *Driver) Run(ctx context.Context) error {
	path, err := socketPath(d.cfg.Endpoint)
	if err != nil {
		return err
	}
	l, err := unixsocket.Listen(path)
	if err != nil {
		return err
	}
	if n, err := d.deps.Volumes.RemoveOrphans(); err != nil {
		klog.ErrorS(err, "removing volumes no target shows", "removed", n)
	} else if n > 0 {
		klog.InfoS("removed volumes no target shows", "removed", n)
	}
	if n, err := d.deps.Volumes.RemoveOrphanStages(d.cfg.KubeletRootDir); err != nil {
		klog.ErrorS(err, "removing provider stages left by a killed driver", "removed", n)
	} else if n > 0 {
		klog.InfoS("removed provider stages left by a killed driver", "removed", n)
	}
	return d.Serve(ctx, l)
}

// Serve serves the Identity and Node services on l until ctx is done, and
// writes the cluster side of publishes in the background.
func (d *Driver) Serve(ctx context.Context, l net.Listener) error {
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcrecover.UnaryServerInterceptor(), logFailures, d.touch))
	csi.RegisterIdentityServer(srv, &identityServer{d: d})
	csi.RegisterNodeServer(srv, &nodeServer{d: d})

	d.base.Store(&ctx)
	errCh := make(chan error, 1)
	go func() { errCh <- srv.Serve(l) }()
	// The background jobs end with Serve: none of them outlives it (a
	// caller that serves again, or changes the logger, races nothing).
	reportCtx, stopReports := context.WithCancel(context.WithoutCancel(ctx))
	var background sync.WaitGroup
	for _, job := range []func(context.Context){d.reporter.run, d.idle.run, d.health.run, d.sweepHeld} {
		background.Go(func() { job(reportCtx) })
	}
	defer func() { stopReports(); background.Wait() }()
	d.serving.Store(true)
	klog.InfoS("serving CSI", "driver", d.cfg.DriverName, "endpoint", l.Addr().String(), "node", d.cfg.NodeID)
	select {
	case err := <-errCh:
		d.serving.Store(false)
		return fmt.Errorf("serve CSI: %w", err)
	case <-ctx.Done():
	}
	d.serving.Store(false)
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		srv.Stop()
	}
	return nil
}

// touch records every CSI call for the idle memory release.
func (d *Driver) touch(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	d.idle.touch()
	return handler(ctx, req)
}

// logFailures logs every failed RPC once, with its method, code and
// duration, and makes sure no handler leaks a non-status error.
func logFailures(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	if err != nil {
		err = toStatus(err)
		st := status.Convert(err)
		klog.ErrorS(errors.New(st.Message()), "CSI call failed", "method", info.FullMethod,
			"code", st.Code().String(), "duration", time.Since(start))
	}
	return resp, err
}
