package cluster

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

// The informer caches hold every pod of the node and every class of the
// cluster for as long as the driver runs, so they keep only what the driver
// reads: its memory must not grow with what other components write into
// these objects (statuses, annotations, managed fields, containers).

// podTrimmer returns the cache transform of pods: the metadata the driver
// reads (identity, owners, deletion), the node, and the CSI volumes of
// driverName (whose classes tell which pods share a synced Secret).
func podTrimmer(driverName string) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil // a tombstone: the informer passes it through
		}
		t := &corev1.Pod{
			TypeMeta:   p.TypeMeta,
			ObjectMeta: trimMeta(p.ObjectMeta),
			Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName, ServiceAccountName: p.Spec.ServiceAccountName},
		}
		for _, v := range p.Spec.Volumes {
			if v.CSI != nil && v.CSI.Driver == driverName {
				t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{
					Name:         v.Name,
					VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: v.CSI.Driver, VolumeAttributes: v.CSI.VolumeAttributes}},
				})
			}
		}
		return t, nil
	}
}

// trimClass is the cache transform of SecretProviderClasses: the spec, no
// annotations (kubectl's last-applied-configuration repeats the whole
// spec), no status (upstream's deprecated byPod list grows with the pods).
func trimClass(obj any) (any, error) {
	c, ok := obj.(*secretsstorev1.SecretProviderClass)
	if !ok {
		return obj, nil
	}
	return &secretsstorev1.SecretProviderClass{TypeMeta: c.TypeMeta, ObjectMeta: trimMeta(c.ObjectMeta), Spec: c.Spec}, nil
}

// trimMeta keeps the metadata the driver reads or needs to write an object
// back: identity, version, labels, owners and deletion.
func trimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, Labels: m.Labels, OwnerReferences: m.OwnerReferences,
		DeletionTimestamp: m.DeletionTimestamp, CreationTimestamp: m.CreationTimestamp,
	}
}
