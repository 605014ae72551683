package cluster

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/internal/kube"
)

// changeTimeout bounds what a change's subPath warning may take of the
// deadline the pod status write after it shares.
const changeTimeout = 5 * time.Second

// changes acts on refreshes that changed a volume's content, for what the
// refresh cannot reach on the node: containers that mount the volume
// through subPath get a Warning event. Restarting workloads is not the
// node's: the pod status reports the change (its ContentChanged
// condition) and keymount-controller restarts the workloads that opted in
// (package controller/restart). The node holds no rule on workloads.
type changes struct {
	pods       kube.Reader // the node's pods: the cache once synced
	driverName string
	rec        record.EventRecorder
}

// newChanges returns the change handler of a node whose pods pods reads.
func newChanges(cfg Config, pods kube.Reader, rec record.EventRecorder) *changes {
	return &changes{pods: pods, driverName: cfg.DriverName, rec: rec}
}

// warnOnChange handles a refresh that changed a volume's content (not a
// first publish, not a failed refresh): a Warning event on the pod when
// containers mount the volume through subPath. Its failures are logs only:
// they never fail the pod status write.
func (c *Cluster) warnOnChange(ctx context.Context, o *driver.Outcome) {
	if c.changes == nil || !o.Changed || o.First || o.Err != nil || o.PodName == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, changeTimeout)
	defer cancel()
	pod, err := c.changes.pod(ctx, o)
	if err != nil || pod == nil {
		if err != nil {
			klog.ErrorS(err, "reading the pod of a changed volume; no subPath warning", "pod", klog.KRef(o.PodNamespace, o.PodName), "volumeID", o.VolumeID)
		}
		return
	}
	WarnSubPath(c.changes.rec, c.changes.driverName, pod, changedClass(o))
}

// pod returns the outcome's pod from the node's pods, nil when it is gone
// or another pod has its name now.
func (ch *changes) pod(ctx context.Context, o *driver.Outcome) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	err := ch.pods.Get(ctx, types.NamespacedName{Namespace: o.PodNamespace, Name: o.PodName}, p)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case o.PodUID != "" && p.UID != types.UID(o.PodUID):
		return nil, nil
	}
	return p, nil
}

// changedClass is the outcome's class, or one with its name alone when it
// was not resolved (no class annotation then opts in).
func changedClass(o *driver.Outcome) *secretsstorev1.SecretProviderClass {
	if o.Class != nil {
		return o.Class
	}
	return &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Namespace: o.PodNamespace, Name: o.ClassName}}
}
