package restart

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Kinds of workload a Restarter restarts.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindDaemonSet   = "DaemonSet"
	kindReplicaSet  = "ReplicaSet"
)

// resources are the REST resources of the apps/v1 kinds a Restarter reads.
var resources = map[string]string{
	KindDeployment:  "deployments",
	KindStatefulSet: "statefulsets",
	KindDaemonSet:   "daemonsets",
	kindReplicaSet:  "replicasets",
}

// ErrNoWorkload is wrapped by Owner's error when the pod has no owner that a
// pod-template change restarts: no controller (a bare or static pod), a
// controller of another kind (a Job, a custom controller), a ReplicaSet no
// Deployment controls, or a controller that is gone.
var ErrNoWorkload = errors.New("no Deployment, StatefulSet or DaemonSet owns the pod")

// Workload is an apps/v1 object whose pod template a Restarter patches.
type Workload struct {
	// Kind is KindDeployment, KindStatefulSet or KindDaemonSet.
	Kind            string
	Namespace, Name string
	UID             types.UID
}

func (w Workload) String() string { return w.Kind + " " + w.Namespace + "/" + w.Name }

func (w Workload) resource() string { return resources[w.Kind] }

// Reference is the workload as events name it.
func (w Workload) Reference() *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: GroupVersion.String(), Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: w.UID,
	}
}

// Owner returns the workload that owns pod through controller references:
// its StatefulSet or DaemonSet, or the Deployment of its ReplicaSet (read
// from the API server). An error wrapping ErrNoWorkload says why there is
// none; other errors are the API server's (apierrors).
func (r *Restarter) Owner(ctx context.Context, pod *corev1.Pod) (Workload, error) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return Workload{}, fmt.Errorf("%w: the pod has no controller", ErrNoWorkload)
	}
	if !isApps(ref) {
		return Workload{}, fmt.Errorf("%w: the pod's controller is %s %s", ErrNoWorkload, ref.Kind, ref.Name)
	}
	switch ref.Kind {
	case KindStatefulSet, KindDaemonSet:
		return Workload{Kind: ref.Kind, Namespace: pod.Namespace, Name: ref.Name, UID: ref.UID}, nil
	case kindReplicaSet:
		return r.deploymentOf(ctx, pod.Namespace, ref)
	}
	return Workload{}, fmt.Errorf("%w: the pod's controller is %s %s", ErrNoWorkload, ref.Kind, ref.Name)
}

// deploymentOf returns the Deployment that controls the ReplicaSet rs.
func (r *Restarter) deploymentOf(ctx context.Context, namespace string, rs *metav1.OwnerReference) (Workload, error) {
	m, err := r.metadata(ctx, resources[kindReplicaSet], namespace, rs.Name)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && m.UID != rs.UID):
		return Workload{}, fmt.Errorf("%w: the pod's ReplicaSet %s is gone", ErrNoWorkload, rs.Name)
	case err != nil:
		return Workload{}, fmt.Errorf("read ReplicaSet %s/%s: %w", namespace, rs.Name, err)
	}
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil || !isApps(ref) || ref.Kind != KindDeployment {
		return Workload{}, fmt.Errorf("%w: no Deployment controls the pod's ReplicaSet %s", ErrNoWorkload, rs.Name)
	}
	return Workload{Kind: KindDeployment, Namespace: namespace, Name: ref.Name, UID: ref.UID}, nil
}

// isApps reports whether ref names an object of the apps group.
func isApps(ref *metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == GroupVersion.Group
}
