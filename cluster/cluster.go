package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster/podstatus"
	"github.com/keymount/keymount/cluster/secretobjects"
	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/internal/panics"
)

// Config says which cluster and node the driver serves.
type Config struct {
	// Rest is the API server connection.
	Rest *rest.Config
	// Node is this node's name.
	Node string
	// DriverName is the CSI driver name pods use in their volumes.
	DriverName string
	// SyncSecrets turns on secretObjects sync (and the Secret watch).
	SyncSecrets bool
	// SyncSecretsAuto sets SyncSecrets, at Start, to whether the driver's
	// RBAC lets it list, watch, create and patch Secrets.
	SyncSecretsAuto bool
	// DiagnoseAfter is how long the caches may take to sync before each
	// diagnosis of what keeps them from syncing (a missing RBAC rule, an
	// API server that does not answer) is logged; 30s when zero.
	DiagnoseAfter time.Duration
}

// Cluster implements driver.Cluster against a real API server.
type Cluster struct {
	synced   atomic.Bool
	resolver *class.KubeResolver
	status   *podstatus.Writer
	sync     *secretobjects.Syncer // nil when sync is off
	events   *eventSink
	live     kube.Reader // reads the API server directly (adoption checks)
	cache    *kube.Cache
	changes  *changes // subPath warnings on change

	// presynced holds, per volume, the condition of the Secret sync a
	// first publish did before kubelet's answer (SyncMissing), for that
	// outcome's AfterPublish, which then need not sync again.
	presyncedMu sync.Mutex
	presynced   map[string]presync
}

// presync is the Secret sync SyncMissing did for one outcome.
type presync struct {
	o      *driver.Outcome
	synced *metav1.Condition
}

var _ driver.Cluster = (*Cluster)(nil)

// Start connects to the API server and starts the node-scoped caches. It
// does not wait for them to sync: until they have, reads go to the API
// server directly and Synced reports false, so the driver serves kubelet at
// once. The caches stop with ctx.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Rest == nil || cfg.Node == "" || cfg.DriverName == "" {
		return nil, errors.New("cluster needs an API server connection, a node name and a driver name")
	}
	// Writes, the cache and events each have their own client, and so
	// their own rate limits: a burst of writes never delays a watch.
	live, err := kube.NewAPI(cfg.Rest)
	if err != nil {
		return nil, fmt.Errorf("connect to the API server: %w", err)
	}
	if err := decideSync(ctx, &cfg); err != nil {
		return nil, err
	}
	cl := &Cluster{live: live}
	c, err := startCache(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cl.cache = c
	go cl.waitForSync(ctx, cfg, c, live)
	rd := &syncedReader{cache: c, live: live, synced: cl.synced.Load}
	events, err := newEventSink(ctx, cfg.Rest, cfg.Node)
	if err != nil {
		return nil, err
	}
	cl.resolver = class.NewKubeResolver(rd, live)
	cl.status = podstatus.New(live, rd, cfg.Node, clock.RealClock{})
	cl.events = events
	if cfg.SyncSecrets {
		cl.sync = secretobjects.New(live, rd, cfg.Node, cfg.DriverName, events.recorder)
	}
	cl.changes = newChanges(cfg, rd, events.recorder)
	return cl, nil
}

// watched lists the types the cache serves, each with its scope.
func watched(cfg Config) []kube.Watch {
	w := []kube.Watch{
		{Object: &secretsstorev1.SecretProviderClass{}, Transform: trimClass},
		{
			Object:    &corev1.Pod{},
			Fields:    fields.OneTermEqualSelector("spec.nodeName", cfg.Node),
			Transform: podTrimmer(cfg.DriverName),
		},
		{
			Object:    &secretsstorev1.SecretProviderClassPodStatus{},
			Labels:    labels.SelectorFromSet(labels.Set{secretsstorev1.InternalNodeLabel: cfg.Node}),
			Transform: kube.StripManagedFields,
		},
	}
	if cfg.SyncSecrets {
		// Secrets keep their managed fields: secretsync reads which keys
		// and owner references keymount's managers applied.
		w = append(w, kube.Watch{
			Object: &corev1.Secret{},
			Labels: labels.SelectorFromSet(labels.Set{secretobjects.ManagedLabel: "true"}),
		})
	}
	return w
}

// startCache starts the informers of the watched types. A read of any
// other type fails instead of starting a cluster-wide informer.
func startCache(ctx context.Context, cfg Config) (*kube.Cache, error) {
	api, err := kube.NewAPI(cfg.Rest)
	if err != nil {
		return nil, fmt.Errorf("connect to the API server: %w", err)
	}
	c, err := kube.NewCache(api, watched(cfg))
	if err != nil {
		return nil, fmt.Errorf("create cache: %w", err)
	}
	c.Start(ctx)
	return c, nil
}

// waitForSync marks the cluster synced once every cache has synced, and
// logs what keeps them from it every DiagnoseAfter until then.
func (c *Cluster) waitForSync(ctx context.Context, cfg Config, ca *kube.Cache, live kube.Reader) {
	every := cfg.DiagnoseAfter
	if every <= 0 {
		every = 30 * time.Second
	}
	for ctx.Err() == nil {
		syncCtx, cancel := context.WithTimeout(ctx, every)
		ok := ca.WaitForSync(syncCtx)
		cancel()
		if ok {
			c.synced.Store(true)
			klog.InfoS("API caches synced")
			return
		}
		if ctx.Err() == nil {
			func() {
				defer panics.Recover(panics.Sweep, "diagnosis of the caches' sync")
				diagnose(ctx, cfg, live)
			}()
		}
	}
}

// Synced reports whether the node-scoped caches have synced.
func (c *Cluster) Synced() bool { return c.synced.Load() }

// Resolver returns the class resolver backed by the cache.
func (c *Cluster) Resolver() class.Resolver { return c.resolver }

// Notify records the events of an outcome on its pod; it does not block.
func (c *Cluster) Notify(o *driver.Outcome) {
	c.events.published(o)
}

// AfterPublish syncs Secrets and writes the pod status.
func (c *Cluster) AfterPublish(ctx context.Context, o *driver.Outcome) error {
	if nothingMounted(o) {
		return nil
	}
	synced, done := c.takePresync(o)
	var syncErr error
	if c.sync != nil && !done {
		synced, syncErr = c.sync.Sync(ctx, o)
	}
	c.warnOnChange(ctx, o)
	return errors.Join(syncErr, c.status.Publish(ctx, o, synced))
}

// firstSyncTimeout bounds the Secret sync a first publish waits for
// (SyncMissing): kubelet's call must not wait long on the API server.
const firstSyncTimeout = 5 * time.Second

// SyncMissing syncs the Secrets of a first publish's class when one of them
// does not exist yet, before kubelet hears back, so that a container
// reading it through env or envFrom starts at once. Bounded by
// firstSyncTimeout (or half the call's deadline); a failure is left to
// AfterPublish, which syncs again in the background.
func (c *Cluster) SyncMissing(ctx context.Context, o *driver.Outcome) {
	if c.sync == nil || !c.sync.Missing(ctx, o) {
		return
	}
	timeout := firstSyncTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)/2)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	synced, err := c.sync.Sync(ctx, o)
	if err != nil {
		klog.V(2).InfoS("the first publish's Secret sync did not finish before kubelet's answer; retrying in the background",
			"volumeID", o.VolumeID, "pod", klog.KRef(o.PodNamespace, o.PodName), "err", err)
		return
	}
	c.presyncedMu.Lock()
	defer c.presyncedMu.Unlock()
	if c.presynced == nil {
		c.presynced = map[string]presync{}
	}
	c.presynced[o.VolumeID] = presync{o: o, synced: synced}
}

// takePresync returns the condition of the sync SyncMissing did for o, and
// whether it did one; it forgets the volume's entry either way (a newer
// outcome replaced an older one's report).
func (c *Cluster) takePresync(o *driver.Outcome) (*metav1.Condition, bool) {
	c.presyncedMu.Lock()
	defer c.presyncedMu.Unlock()
	p, ok := c.presynced[o.VolumeID]
	delete(c.presynced, o.VolumeID)
	if !ok || p.o != o {
		return nil, false
	}
	return p.synced, true
}

// AfterUnpublish removes the pod status of the volume.
func (c *Cluster) AfterUnpublish(ctx context.Context, rec *volume.Record) error {
	c.presyncedMu.Lock()
	delete(c.presynced, rec.VolumeID)
	c.presyncedMu.Unlock()
	return c.status.Delete(ctx, rec)
}

// nothingMounted is a failed first publish: there is no status to write and
// nothing to sync, only the event.
func nothingMounted(o *driver.Outcome) bool {
	return o.First && o.Err != nil
}
