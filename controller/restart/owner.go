package restart

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
// its StatefulSet or DaemonSet, or the Deployment of its ReplicaSet, each
// confirmed as the workload controllers confirm what they own (read from
// the API server): a pod sets its own owner references, so a reference
// alone proves nothing. Every controller in the chain must exist with the
// UID the reference names, and its selector must match the pod's labels
// (and, for a Deployment, its ReplicaSet's labels too): a pod that claims
// a workload it does not belong to gets ErrNoWorkload. An error wrapping
// ErrNoWorkload says why there is none; other errors are the API server's
// (apierrors).
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
		if _, err := r.confirm(ctx, pod.Namespace, ref, pod.Labels); err != nil {
			return Workload{}, err
		}
		return Workload{Kind: ref.Kind, Namespace: pod.Namespace, Name: ref.Name, UID: ref.UID}, nil
	case kindReplicaSet:
		return r.deploymentOf(ctx, pod, ref)
	}
	return Workload{}, fmt.Errorf("%w: the pod's controller is %s %s", ErrNoWorkload, ref.Kind, ref.Name)
}

// deploymentOf returns the Deployment that controls the pod's ReplicaSet
// rs, both confirmed.
func (r *Restarter) deploymentOf(ctx context.Context, pod *corev1.Pod, rs *metav1.OwnerReference) (Workload, error) {
	m, err := r.confirm(ctx, pod.Namespace, rs, pod.Labels)
	if err != nil {
		return Workload{}, err
	}
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil || !isApps(ref) || ref.Kind != KindDeployment {
		return Workload{}, fmt.Errorf("%w: no Deployment controls the pod's ReplicaSet %s", ErrNoWorkload, rs.Name)
	}
	if _, err := r.confirm(ctx, pod.Namespace, ref, pod.Labels, m.Labels); err != nil {
		return Workload{}, err
	}
	return Workload{Kind: KindDeployment, Namespace: pod.Namespace, Name: ref.Name, UID: ref.UID}, nil
}

// confirm reads the controller ref names in namespace and checks that it
// is the one named (its UID) and that its selector matches every set of
// labels of what it is said to control, as its controller checks before it
// counts a pod (or ReplicaSet) as its own. It returns the controller's
// metadata.
func (r *Restarter) confirm(ctx context.Context, namespace string, ref *metav1.OwnerReference, controlled ...map[string]string) (*metav1.ObjectMeta, error) {
	c, err := r.controller(ctx, resources[ref.Kind], namespace, ref.Name)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && c.Metadata.UID != ref.UID):
		return nil, fmt.Errorf("%w: the pod's %s %s is gone", ErrNoWorkload, ref.Kind, ref.Name)
	case err != nil:
		return nil, fmt.Errorf("read %s %s/%s: %w", ref.Kind, namespace, ref.Name, err)
	}
	sel, err := selectorOf(c.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s has no usable selector: %w", ErrNoWorkload, ref.Kind, ref.Name, err)
	}
	for _, l := range controlled {
		if !sel.Matches(labels.Set(l)) {
			return nil, fmt.Errorf("%w: the pod names %s %s as its controller, but its selector %s does not match the pod's labels: "+
				"the pod claims a workload it does not belong to", ErrNoWorkload, ref.Kind, ref.Name, sel)
		}
	}
	return &c.Metadata, nil
}

// selectorOf converts a controller's selector. A missing or empty selector
// selects nothing here (apps/v1 refuses both; its controllers act on no pod
// for them).
func selectorOf(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0) {
		return nil, errors.New("the selector is empty")
	}
	return metav1.LabelSelectorAsSelector(s)
}

// isApps reports whether ref names an object of the apps group.
func isApps(ref *metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == GroupVersion.Group
}
