package driver

import (
	"context"
	"time"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/rotation"
)

// Outcome is one publish attempt, as the cluster side needs to know it.
// It holds no secret material: a Cluster that syncs Secrets reads the files
// from DataDir itself.
type Outcome struct {
	VolumeID   string
	TargetPath string
	// DataDir holds the files the pod sees (package atomicwrite's layout).
	DataDir string
	// Pod and class names are from the request; Class is the resolved
	// class, nil when it could not be resolved.
	PodName, PodNamespace, PodUID string
	ClassName                     string
	Class                         *secretsstorev1.SecretProviderClass
	// Objects are the mounted objects and versions.
	Objects []volume.Object
	// First is a first publish; Changed says the files changed.
	First, Changed bool
	// Err is a failed attempt. With First it failed a first publish and
	// nothing is mounted (Class is nil when the class was not found);
	// otherwise a refresh failed and the files mounted before were kept.
	Err error
	// LastRefresh is when the provider last answered successfully.
	LastRefresh time.Time
	// Previous are the objects mounted before a refresh (nil for a first
	// publish), for events that say what changed.
	Previous []volume.Object
	// Triggered says a new refresh trigger value caused this refresh;
	// Handled are the trigger values the volume has now acted on.
	Triggered bool
	Handled   rotation.Triggers
	// PolicyProblems are the class's invalid rotation annotations, each
	// naming the annotation and the fix.
	PolicyProblems []string
}

// Cluster is what the driver tells the Kubernetes API about its volumes,
// and asks of it: pod statuses, synced Secrets, events, and whether the
// upstream driver published a volume. It is the driver's one interface to
// the API-server side (package cluster implements it); a driver without a
// cluster (the CLI, the demo) has none. Every capability is a method here,
// none an optional interface, so a wrapper that forgets one does not
// compile. Fakes embed NoCluster and override what they test.
//
// The driver calls Notify, AfterPublish and AfterUnpublish after the volume
// lock is released, from its own workers, never on kubelet's path: Notify
// at once for every outcome (it must not block: events are queued),
// AfterPublish and AfterUnpublish with a deadline of their own, coalesced
// per volume (the newest outcome wins) and retried with backoff until they
// succeed or a newer outcome replaces them. Both must therefore be
// idempotent.
type Cluster interface {
	// Notify records events about an outcome; it must not block.
	Notify(o *Outcome)
	// AfterPublish writes the pod status and syncs Secrets.
	AfterPublish(ctx context.Context, o *Outcome) error
	// AfterUnpublish removes what AfterPublish wrote for the volume.
	AfterUnpublish(ctx context.Context, rec *volume.Record) error
	// Synced reports whether the caches the cluster side reads have synced.
	Synced() bool
	// SyncMissing is called on a successful first publish, before kubelet
	// hears back: the Secrets its class syncs that do not exist yet are
	// written, so that containers reading them through env or envFrom
	// start without a CreateContainerConfigError. It is bounded by its
	// own short deadline and never fails the publish: AfterPublish writes
	// whatever it could not. A cluster that syncs no Secrets does nothing.
	SyncMissing(ctx context.Context, o *Outcome)
	// UpstreamMounted tells whether the upstream Secrets Store CSI Driver
	// published a volume: the pod status it wrote for the pod's volume of
	// the class says mounted at the target. A cluster that cannot tell
	// answers false.
	UpstreamMounted(ctx context.Context, podNamespace, podName, className, targetPath string) (bool, error)
}

// NoCluster is a Cluster that writes nothing and knows of no upstream
// volume. Fakes embed it and override the methods they observe.
type NoCluster struct{}

var _ Cluster = NoCluster{}

// Notify does nothing.
func (NoCluster) Notify(*Outcome) {}

// AfterPublish writes nothing.
func (NoCluster) AfterPublish(context.Context, *Outcome) error { return nil }

// AfterUnpublish removes nothing.
func (NoCluster) AfterUnpublish(context.Context, *volume.Record) error { return nil }

// Synced is always true: there is nothing to sync.
func (NoCluster) Synced() bool { return true }

// SyncMissing writes nothing.
func (NoCluster) SyncMissing(context.Context, *Outcome) {}

// UpstreamMounted is always false.
func (NoCluster) UpstreamMounted(context.Context, string, string, string, string) (bool, error) {
	return false, nil
}
