package podstatus

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/kube"
)

// DefaultRefreshTimeGranularity leaves lastRefreshTime to be written only
// together with another change (see the package documentation): a volume
// whose content and conditions stay the same costs no API write, however
// often it is refreshed.
const DefaultRefreshTimeGranularity = NeverAlone

// NeverAlone as Writer.RefreshTimeGranularity writes lastRefreshTime only
// with another change.
const NeverAlone time.Duration = -1

// ErrInvalidCondition is returned by Publish for a SecretsSynced condition
// the API server would reject.
var ErrInvalidCondition = errors.New("invalid SecretsSynced condition")

// Writer creates, updates and deletes the pod statuses of one node's
// volumes. It holds no per-volume state and is safe for concurrent use.
type Writer struct {
	c    kube.Client
	r    kube.Reader
	node string
	clk  clock.PassiveClock

	// RefreshTimeGranularity is how much newer a refresh must be than the
	// stored lastRefreshTime for it to be written when nothing else
	// changed. New sets DefaultRefreshTimeGranularity (NeverAlone); zero
	// writes every refresh (to the second). Change it before the first
	// Publish only.
	RefreshTimeGranularity time.Duration
}

// New returns a Writer for node. c writes and is read after a conflict; r
// serves the first read of each Publish and Delete: the node-scoped cache,
// or c itself.
func New(c kube.Client, r kube.Reader, node string, clk clock.PassiveClock) *Writer {
	return &Writer{c: c, r: r, node: node, clk: clk, RefreshTimeGranularity: DefaultRefreshTimeGranularity}
}

// Name returns upstream's pod status name: <pod>-<namespace>-<class>.
func Name(pod, namespace, class string) string {
	return pod + "-" + namespace + "-" + class
}

// Publish creates or updates the pod status for a publish outcome. synced is
// the SecretsSynced condition to set; nil means the class syncs nothing and
// removes that condition. Nothing is written when the stored object already
// says the same, and nothing is created for a failed first publish: nothing
// is mounted.
func (w *Writer) Publish(ctx context.Context, o *driver.Outcome, synced *metav1.Condition) error {
	if failedFirstPublish(o) {
		return nil
	}
	if err := validateSynced(synced); err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: o.PodNamespace, Name: Name(o.PodName, o.PodNamespace, o.ClassName)}
	d := w.desired(o, synced)
	var rd = w.r
	return retry.OnError(retry.DefaultRetry, isRetriable, func() error {
		err := w.publish(ctx, rd, key, d)
		rd = w.c // retries read the live object, never a stale cache
		return err
	})
}

func (w *Writer) publish(ctx context.Context, rd kube.Reader, key types.NamespacedName, d *desired) error {
	cur := &secretsstorev1.SecretProviderClassPodStatus{}
	err := rd.Get(ctx, key, cur)
	if apierrors.IsNotFound(err) {
		return w.create(ctx, key, d)
	}
	if err != nil {
		return fmt.Errorf("get pod status %s: %w", key, err)
	}
	next := cur.DeepCopy()
	if !d.apply(next, w.node, w.RefreshTimeGranularity) {
		klog.V(5).InfoS("pod status unchanged", "podStatus", klog.KObj(cur))
		return nil
	}
	if err := w.c.Update(ctx, next); err != nil {
		return fmt.Errorf("update pod status %s: %w", key, err)
	}
	klog.V(2).InfoS("pod status updated", "podStatus", klog.KObj(next), "current", d.current.Status)
	return nil
}

func (w *Writer) create(ctx context.Context, key types.NamespacedName, d *desired) error {
	st := &secretsstorev1.SecretProviderClassPodStatus{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
	}
	d.apply(st, w.node, w.RefreshTimeGranularity)
	if err := w.c.Create(ctx, st, ""); err != nil {
		// AlreadyExists: the cache had not seen it yet; retried as an update.
		return fmt.Errorf("create pod status %s: %w", key, err)
	}
	klog.V(2).InfoS("pod status created", "podStatus", klog.KObj(st), "current", d.current.Status)
	return nil
}

// failedFirstPublish reports an outcome that left nothing mounted: there is
// no volume to describe.
func failedFirstPublish(o *driver.Outcome) bool {
	return o.First && o.Err != nil
}

func isRetriable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}

// Delete removes the pod status of an unpublished volume. A status already
// gone is fine. A status that now belongs to another pod (a pod recreated
// with the same name, maybe on another node) is left alone: the delete is
// conditional on the resourceVersion that was checked.
func (w *Writer) Delete(ctx context.Context, rec *volume.Record) error {
	key := types.NamespacedName{Namespace: rec.PodNamespace, Name: Name(rec.PodName, rec.PodNamespace, rec.Class)}
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := w.delete(ctx, first, key, rec)
		first = false
		return err
	})
}

// delete reads from the cache on the first attempt and from the live
// client after that, or when the cache has not seen the status (it may have
// been created moments ago).
func (w *Writer) delete(ctx context.Context, first bool, key types.NamespacedName, rec *volume.Record) error {
	cur := &secretsstorev1.SecretProviderClassPodStatus{}
	var err error
	if first {
		err = w.r.Get(ctx, key, cur)
	}
	if !first || apierrors.IsNotFound(err) {
		err = w.c.Get(ctx, key, cur)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pod status %s: %w", key, err)
	}
	if !w.owns(cur, rec) {
		klog.V(2).InfoS("pod status belongs to another pod, keeping it", "podStatus", klog.KObj(cur),
			"volumeID", rec.VolumeID)
		return nil
	}
	rv := cur.ResourceVersion
	err = w.c.Delete(ctx, cur, &metav1.Preconditions{ResourceVersion: &rv})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete pod status %s: %w", key, err)
	}
	klog.V(2).InfoS("pod status deleted", "podStatus", klog.KObj(cur))
	return nil
}

// owns reports whether st describes rec's pod on this node, as far as both
// say: a status without a node label or pod owner reference is this
// driver's to delete.
func (w *Writer) owns(st *secretsstorev1.SecretProviderClassPodStatus, rec *volume.Record) bool {
	if n, ok := st.Labels[secretsstorev1.InternalNodeLabel]; ok && n != w.node {
		return false
	}
	if rec.PodUID == "" {
		return true
	}
	for _, ref := range st.OwnerReferences {
		if isPodRef(ref) && string(ref.UID) != rec.PodUID {
			return false
		}
	}
	return true
}
