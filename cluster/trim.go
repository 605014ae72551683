package cluster

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/rotation"
)

// The informer caches hold every pod of the node and every class of the
// cluster for as long as the driver runs, so they keep only what the driver
// reads: its memory must not grow with what other components write into
// these objects (statuses, annotations, managed fields, containers).

// podTrimmer returns the cache transform of pods: the metadata the driver
// reads (identity, owners, deletion, keymount's annotations), the node, the
// CSI volumes of driverName (whose classes tell which pods share a synced
// Secret) and the containers' subPath mounts of those volumes (which never
// see a refresh).
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
		ours := map[string]bool{}
		for _, v := range p.Spec.Volumes {
			if v.CSI != nil && v.CSI.Driver == driverName {
				ours[v.Name] = true
				t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{
					Name:         v.Name,
					VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: v.CSI.Driver, VolumeAttributes: v.CSI.VolumeAttributes}},
				})
			}
		}
		t.Spec.InitContainers = subPathMounts(p.Spec.InitContainers, ours)
		t.Spec.Containers = subPathMounts(p.Spec.Containers, ours)
		return t, nil
	}
}

// subPathMounts returns, of containers, the names, restart policies (which
// tell a sidecar from an init container that has exited) and the subPath
// mounts of the volumes in ours, leaving out containers without one.
func subPathMounts(containers []corev1.Container, ours map[string]bool) []corev1.Container {
	var out []corev1.Container
	for _, c := range containers {
		var mounts []corev1.VolumeMount
		for _, m := range c.VolumeMounts {
			if ours[m.Name] && (m.SubPath != "" || m.SubPathExpr != "") {
				mounts = append(mounts, corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath, SubPath: m.SubPath, SubPathExpr: m.SubPathExpr})
			}
		}
		if mounts != nil {
			out = append(out, corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy, VolumeMounts: mounts})
		}
	}
	return out
}

// trimClass is the cache transform of SecretProviderClasses: the spec and
// keymount's annotations, no other annotation (kubectl's
// last-applied-configuration repeats the whole spec), no status (upstream's
// deprecated byPod list grows with the pods).
func trimClass(obj any) (any, error) {
	c, ok := obj.(*secretsstorev1.SecretProviderClass)
	if !ok {
		return obj, nil
	}
	return &secretsstorev1.SecretProviderClass{TypeMeta: c.TypeMeta, ObjectMeta: trimMeta(c.ObjectMeta), Spec: c.Spec}, nil
}

// trimMeta keeps the metadata the driver reads or needs to write an object
// back: identity, version, labels, keymount's annotations, owners and
// deletion.
func trimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, Labels: m.Labels, Annotations: ownAnnotations(m.Annotations),
		OwnerReferences: m.OwnerReferences, DeletionTimestamp: m.DeletionTimestamp, CreationTimestamp: m.CreationTimestamp,
	}
}

// ownAnnotations returns the annotations under rotation.AnnotationPrefix,
// nil when there are none.
func ownAnnotations(all map[string]string) map[string]string {
	var out map[string]string
	for k, v := range all {
		if strings.HasPrefix(k, rotation.AnnotationPrefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
