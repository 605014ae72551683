package secretobjects

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/internal/atomicwrite"
	"github.com/keymount/keymount/internal/kube"
)

const (
	// ManagedLabel marks, with the value "true", a Secret keymount (or the
	// upstream driver) created and syncs. The node's Secret cache watches
	// only Secrets with it.
	ManagedLabel = "secrets-store.csi.k8s.io/managed"
	// ClassAnnotation names the SecretProviderClass that syncs a Secret.
	ClassAnnotation = "keymount.io/secretproviderclass"
	// NodeFieldManager applies the content of synced Secrets; owner references
	// are applied by keymount-node-<node>.
	NodeFieldManager = "keymount"
	// maxAttempts bounds the writes of one Secret in one sync that fail
	// because the Secret changed since it was read.
	maxAttempts = 4
)

// Syncer mirrors mounted files into the Secrets of a class. It is safe for
// concurrent use.
type Syncer struct {
	c           kube.Client
	r           kube.Reader
	node        string
	driverName  string
	nodeManager string
	rec         record.EventRecorder
	warned      warnings
	// settle is how much later another node's answer must be to replace
	// content (DefaultSettle).
	settle time.Duration
	// writes hears each Secret written or left as it was; nil: none.
	writes WriteObserver
}

// WriteObserver hears, for metrics, each Secret a sync brought to what it
// should hold: written (created, or content or owner references applied)
// or left as it was because it already held that (or newer content another
// node synced). provider is the class's provider; took is how long the
// Secret's sync took (its reads and writes, retries included). Failed syncs
// are not heard. Its method must not block.
type WriteObserver interface {
	SecretSynced(provider string, written bool, took time.Duration)
}

// ObserveWrites makes o hear the Syncer's writes. Call it before the first
// Sync.
func (s *Syncer) ObserveWrites(o WriteObserver) { s.writes = o }

// New returns a Syncer for node. c applies Secrets and reads live; r reads
// the node-scoped cache (Secrets with ManagedLabel, this node's Pods);
// driverName is the CSI driver name pods use in their volumes; rec emits
// events on pods (nil: none).
func New(c kube.Client, r kube.Reader, node, driverName string, rec record.EventRecorder) *Syncer {
	return &Syncer{c: c, r: r, node: node, driverName: driverName, nodeManager: nodeManager(node), rec: rec, settle: DefaultSettle}
}

// Sync mirrors the files of one outcome into the class's secretObjects and
// returns the SecretsSynced condition: nil when there is nothing to sync (the
// class has no secretObjects, or a first publish failed and nothing is
// mounted). After a failed refresh the Secrets are synced from the files the
// volume kept. The error is an API failure worth retrying at the next sync;
// problems only a change of the class or the cluster fixes are in the
// condition only.
func (s *Syncer) Sync(ctx context.Context, o *driver.Outcome) (*metav1.Condition, error) {
	if !hasSomethingToSync(o) {
		return nil, nil
	}
	files, err := s.readFiles(o)
	if err != nil {
		r := failure("", ReasonSyncFailed, fmt.Sprintf("cannot read the mounted files of class %q to sync its Secrets: %v", o.Class.Name, err))
		r.err = fmt.Errorf("read the files of volume %s: %w", o.VolumeID, err)
		s.announce(o, r)
		return condition([]result{r})
	}
	owners := &ownerSet{s: s, o: o}
	seen := map[string]bool{}
	var results []result
	for i, so := range o.Class.Spec.SecretObjects {
		if so == nil {
			continue
		}
		var r result
		if msg := validate(o.Class.Name, i, so); msg != "" {
			r = failure(so.SecretName, ReasonSyncFailed, msg)
		} else if seen[so.SecretName] {
			r = failure(so.SecretName, ReasonSyncFailed,
				fmt.Sprintf("Secret %q is listed twice in secretObjects of class %q: keep one entry", so.SecretName, o.Class.Name))
		} else {
			seen[so.SecretName] = true
			r = s.syncSecret(ctx, o, files, owners, so)
		}
		s.announce(o, r)
		results = append(results, r)
	}
	if len(results) == 0 {
		return nil, nil
	}
	return condition(results)
}

// Missing reports whether the outcome's class syncs a Secret the node's
// cache does not hold: one that does not exist yet (or that keymount does
// not manage, which Sync refuses). It reads only the cache.
func (s *Syncer) Missing(ctx context.Context, o *driver.Outcome) bool {
	if !hasSomethingToSync(o) {
		return false
	}
	for _, so := range o.Class.Spec.SecretObjects {
		if so == nil || so.SecretName == "" {
			continue
		}
		err := s.r.Get(ctx, types.NamespacedName{Namespace: o.PodNamespace, Name: so.SecretName}, &corev1.Secret{})
		if err != nil {
			return true
		}
	}
	return false
}

// hasSomethingToSync reports whether the class lists Secrets and files are
// mounted: a first publish that failed left none.
func hasSomethingToSync(o *driver.Outcome) bool {
	failedFirst := o.First && o.Err != nil
	return o.Class != nil && len(o.Class.Spec.SecretObjects) > 0 && !failedFirst
}

// readFiles reads the files the pod sees.
func (s *Syncer) readFiles(o *driver.Outcome) (volumeFiles, error) {
	if o.DataDir == "" {
		return nil, errors.New("the outcome names no data directory")
	}
	files, err := atomicwrite.Read(o.DataDir)
	if err != nil {
		return nil, err
	}
	return newVolumeFiles(files), nil
}

// ownerSet computes this node's owners of the class's Secrets once per Sync,
// when a Secret needs them.
type ownerSet struct {
	s      *Syncer
	o      *driver.Outcome
	owners []owner
	err    error
	done   bool
}

func (set *ownerSet) get(ctx context.Context) ([]owner, error) {
	if !set.done {
		set.owners, set.err = set.s.nodeOwners(ctx, set.o)
		set.done = true
	}
	return set.owners, set.err
}

// syncSecret syncs one valid secretObject. A write that fails because the
// Secret changed since it was read (isRace) is decided anew on the Secret
// read live, up to maxAttempts times.
func (s *Syncer) syncSecret(ctx context.Context, o *driver.Outcome, files volumeFiles, owners *ownerSet, so *secretsstorev1.SecretObject) result {
	d, msg := desiredSecret(o.PodNamespace, o.Class.Name, so, files)
	if msg != "" {
		return failure(so.SecretName, ReasonSyncFailed, msg)
	}
	start := time.Now()
	cur, err := s.current(ctx, d)
	if err != nil {
		return apiFailure(d, "read", err)
	}
	mine := stamp{node: s.node, at: o.LastRefresh}
	var done result // what earlier attempts wrote
	for attempt := 1; ; attempt++ {
		if cur != nil {
			if r, refused := s.refusal(ctx, d, cur); refused {
				return r
			}
		}
		podOwners, err := owners.get(ctx)
		if err != nil {
			return apiFailure(d, "list the pods that own", err)
		}
		r, err := s.write(ctx, d, cur, podOwners, mine)
		done.created = done.created || r.created
		if len(r.changed) > 0 {
			done.changed = r.changed
		}
		if err != nil && isRace(err) && attempt < maxAttempts {
			if cur, err = s.live(ctx, d); err != nil {
				return apiFailure(d, "read", err)
			}
			continue
		}
		if err != nil {
			return apiFailure(d, "write", err)
		}
		s.observe(o, !r.unchanged, time.Since(start))
		r.created, r.changed = done.created, done.changed
		s.logWrite(o, d, r)
		return r
	}
}

// observe tells the WriteObserver about one Secret synced.
func (s *Syncer) observe(o *driver.Outcome, written bool, took time.Duration) {
	if s.writes != nil {
		s.writes.SecretSynced(string(o.Class.Spec.Provider), written, took)
	}
}

func (s *Syncer) logWrite(o *driver.Outcome, d *desired, r result) {
	switch {
	case r.kept != "":
		klog.V(2).InfoS("secret keeps newer content", "secret", klog.KRef(d.namespace, d.name), "spc", klog.KObj(o.Class),
			"pod", klog.KRef(o.PodNamespace, o.PodName), "reason", r.kept)
	case r.created || len(r.changed) > 0:
		klog.V(2).InfoS("synced secret", "secret", klog.KRef(d.namespace, d.name), "spc", klog.KObj(o.Class),
			"pod", klog.KRef(o.PodNamespace, o.PodName), "created", r.created, "keys", r.changed)
	}
}

// apiFailure is a failed API request about d.
func apiFailure(d *desired, what string, err error) result {
	r := failure(d.name, ReasonSyncFailed, fmt.Sprintf("cannot %s Secret %q of class %q: %v", what, d.name, d.class, err))
	r.err = fmt.Errorf("secret %s/%s: %s: %w", d.namespace, d.name, what, err)
	return r
}
