package restart

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

// classAttribute is the CSI volume attribute naming the class.
const classAttribute = "secretProviderClass"

// reportsChange reports whether a pod status says a refresh changed its
// volume's content (the node's ContentChanged condition).
func reportsChange(st *secretsstorev1.SecretProviderClassPodStatus) bool {
	return meta.IsStatusConditionTrue(st.Status.Conditions, secretsstorev1.ConditionContentChanged)
}

// changeReports passes the pod status events worth a reconcile: one that
// reports a change, when it appears (or is listed at start) or when its
// objects or its report changed. Writes of lastRefreshTime or other
// conditions alone cost nothing.
func changeReports() predicate.TypedPredicate[*secretsstorev1.SecretProviderClassPodStatus] {
	return predicate.TypedFuncs[*secretsstorev1.SecretProviderClassPodStatus]{
		CreateFunc: func(e event.TypedCreateEvent[*secretsstorev1.SecretProviderClassPodStatus]) bool {
			return reportsChange(e.Object)
		},
		UpdateFunc: func(e event.TypedUpdateEvent[*secretsstorev1.SecretProviderClassPodStatus]) bool {
			return reportsChange(e.ObjectNew) && (!reportsChange(e.ObjectOld) ||
				!slices.Equal(e.ObjectOld.Status.Objects, e.ObjectNew.Status.Objects))
		},
		DeleteFunc:  func(event.TypedDeleteEvent[*secretsstorev1.SecretProviderClassPodStatus]) bool { return false },
		GenericFunc: func(event.TypedGenericEvent[*secretsstorev1.SecretProviderClassPodStatus]) bool { return false },
	}
}

// trimPodStatus is the cache transform of pod statuses: what a change
// report needs, no managedFields.
func trimPodStatus(obj any) (any, error) {
	st, ok := obj.(*secretsstorev1.SecretProviderClassPodStatus)
	if !ok {
		return obj, nil
	}
	return &secretsstorev1.SecretProviderClassPodStatus{
		ObjectMeta: metav1.ObjectMeta{
			Name: st.Name, Namespace: st.Namespace, UID: st.UID, ResourceVersion: st.ResourceVersion,
			OwnerReferences: st.OwnerReferences,
		},
		Status: secretsstorev1.SecretProviderClassPodStatusStatus{
			PodName: st.Status.PodName, SecretProviderClassName: st.Status.SecretProviderClassName,
			Objects: st.Status.Objects, Conditions: st.Status.Conditions,
		},
	}, nil
}

// podStatusReconciler restarts the workload of a pod whose pod status
// reports a change, when the pod or its class opted in.
type podStatusReconciler struct {
	cache      client.Reader // trimmed pod statuses
	live       client.Reader // pods and classes, read only on a change
	r          *Restarter
	driverName string
}

// Reconcile acts on one pod status. The pod is read from the API server
// and must be the one the status's owner reference names (its UID), and
// must mount the status's class with keymount's driver: a node writes pod
// statuses, and what it says is checked against what it cannot write.
func (p *podStatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	st := &secretsstorev1.SecretProviderClassPodStatus{}
	if err := p.cache.Get(ctx, req.NamespacedName, st); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !reportsChange(st) || st.Status.PodName == "" || st.Status.SecretProviderClassName == "" {
		return ctrl.Result{}, nil
	}
	pod, err := p.pod(ctx, st)
	if err != nil || pod == nil {
		return ctrl.Result{}, err
	}
	class := &secretsstorev1.SecretProviderClass{}
	err = p.live.Get(ctx, types.NamespacedName{Namespace: st.Namespace, Name: st.Status.SecretProviderClassName}, class)
	switch {
	case apierrors.IsNotFound(err):
		class.Namespace, class.Name = st.Namespace, st.Status.SecretProviderClassName // no class annotation opts in
	case err != nil:
		return ctrl.Result{}, err
	}
	res, err := p.r.Restart(ctx, Change{Pod: pod, Class: class, Objects: st.Status.Objects})
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case res.Patched:
		klog.InfoS("restarting workload: its volume changed", "pod", klog.KObj(pod), "spc", klog.KObj(class),
			"workload", res.Workload.String(), "annotation", res.Key, "value", res.Value, "generation", res.Generation)
	case res.Stale:
		klog.V(2).InfoS("not restarting for an older pod's change", "pod", klog.KObj(pod), "reason", res.Skipped)
	}
	return ctrl.Result{}, nil
}

// pod returns the pod st reports on, nil when it is gone, is another pod
// than st's owner reference names, or does not mount st's class.
func (p *podStatusReconciler) pod(ctx context.Context, st *secretsstorev1.SecretProviderClassPodStatus) (*corev1.Pod, error) {
	var uid types.UID
	for _, ref := range st.OwnerReferences {
		if ref.APIVersion == "v1" && ref.Kind == "Pod" && ref.Name == st.Status.PodName {
			uid = ref.UID
		}
	}
	if uid == "" {
		return nil, nil
	}
	pod := &corev1.Pod{}
	err := p.live.Get(ctx, types.NamespacedName{Namespace: st.Namespace, Name: st.Status.PodName}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case pod.UID != uid || pod.DeletionTimestamp != nil || !mounts(pod, p.driverName, st.Status.SecretProviderClassName):
		return nil, nil
	}
	return pod, nil
}

// mounts reports whether pod has a CSI volume of driverName and class.
func mounts(pod *corev1.Pod, driverName, class string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.CSI != nil && v.CSI.Driver == driverName && v.CSI.VolumeAttributes[classAttribute] == class {
			return true
		}
	}
	return false
}
