package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster/restart"
	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/internal/kube"
)

// restartTimeout bounds what a change's subPath warning and restart may
// take of the deadline the pod status write after it shares.
const restartTimeout = 5 * time.Second

// changes acts on refreshes that changed a volume's content, for what the
// refresh cannot reach: containers that mount the volume through subPath,
// and workloads that opted in to a restart.
type changes struct {
	pods      kube.Reader // the node's pods: the cache once synced
	restarter *restart.Restarter
}

// newChanges returns the change handler of a node whose pods pods reads.
// It connects to nothing until a change happens.
func newChanges(cfg Config, pods kube.Reader, rec record.EventRecorder) (*changes, error) {
	apps, err := kube.NewRESTClient(cfg.Rest, restart.GroupVersion)
	if err != nil {
		return nil, fmt.Errorf("apps client: %w", err)
	}
	return &changes{pods: pods, restarter: restart.New(apps, cfg.DriverName, rec)}, nil
}

// restartOnChange handles a refresh that changed a volume's content (not a
// first publish, not a failed refresh): a Warning event on the pod when
// containers mount the volume through subPath, and a restart of the pod's
// workload when the pod or the class opted in (package restart). Its
// failures are logs and events only: they never fail the pod status write.
func (c *Cluster) restartOnChange(ctx context.Context, o *driver.Outcome) {
	if c.changes == nil || !o.Changed || o.First || o.Err != nil || o.PodName == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	pod, err := c.changes.pod(ctx, o)
	if err != nil || pod == nil {
		if err != nil {
			klog.ErrorS(err, "reading the pod of a changed volume; no subPath warning or restart", "pod", klog.KRef(o.PodNamespace, o.PodName), "volumeID", o.VolumeID)
		}
		return
	}
	ch := restart.Change{Pod: pod, Class: changedClass(o), Objects: o.Objects}
	c.changes.restarter.WarnSubPath(ch)
	res, err := c.changes.restarter.Restart(ctx, ch)
	switch {
	case err != nil:
		klog.ErrorS(err, "restarting the workload of a changed volume", "pod", klog.KObj(pod), "spc", klog.KRef(o.PodNamespace, ch.Class.Name))
	case res.Patched:
		klog.InfoS("restarting workload: its volume changed", "pod", klog.KObj(pod), "spc", klog.KRef(o.PodNamespace, ch.Class.Name),
			"workload", res.Workload.String(), "annotation", res.Key, "value", res.Value, "generation", res.Generation)
	case res.Workload != (restart.Workload{}):
		klog.V(2).InfoS("workload already restarted for this change", "pod", klog.KObj(pod), "workload", res.Workload.String())
	}
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
