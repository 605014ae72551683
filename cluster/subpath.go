package cluster

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/rotation"
)

// ReasonSubPathNotRefreshed is the reason of the Warning event on a pod
// whose containers mount the refreshed volume through subPath and keep the
// old content. The node records it: it is an event on a pod of the node,
// not a write to a workload (restarts are keymount-controller's, package
// cluster/restart).
const ReasonSubPathNotRefreshed = "SecretSubPathNotRefreshed"

// classAttribute is the CSI volume attribute naming the class.
const classAttribute = "secretProviderClass"

// Mount is a container's mount of a volume through subPath or subPathExpr.
type Mount struct {
	Container, MountPath string
}

func (m Mount) String() string { return m.Container + " (" + m.MountPath + ")" }

// SubPathMounts returns the mounts, through subPath or subPathExpr, of the
// pod's volumes of class (CSI volumes of driverName) by its containers and
// its sidecars (init containers that keep running): they keep showing what
// the volume held when the container started. Init containers that ran to
// completion before the pod started are left out.
func SubPathMounts(pod *corev1.Pod, driverName, class string) []Mount {
	volumes := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.CSI != nil && v.CSI.Driver == driverName && v.CSI.VolumeAttributes[classAttribute] == class {
			volumes[v.Name] = true
		}
	}
	if len(volumes) == 0 {
		return nil
	}
	var mounts []Mount
	add := func(c *corev1.Container) {
		for _, m := range c.VolumeMounts {
			if volumes[m.Name] && (m.SubPath != "" || m.SubPathExpr != "") {
				mounts = append(mounts, Mount{Container: c.Name, MountPath: m.MountPath})
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return mounts
}

// WarnSubPath records, with rec, a Warning event on pod naming the
// containers that mount its volume of class through subPath, when there
// are any, and returns their mounts.
func WarnSubPath(rec record.EventRecorder, driverName string, pod *corev1.Pod, class *secretsstorev1.SecretProviderClass) []Mount {
	mounts := SubPathMounts(pod, driverName, class.Name)
	if len(mounts) == 0 || rec == nil {
		return mounts
	}
	names := make([]string, len(mounts))
	for i, m := range mounts {
		names[i] = m.String()
	}
	then := fmt.Sprintf("set the annotation %s: \"true\" on the pod template or the class to restart the workload on a change",
		rotation.RestartAnnotation)
	if rotation.RestartEnabled(pod.Annotations, class.Annotations) {
		then = fmt.Sprintf("%s: keymount-controller restarts the workload", rotation.RestartAnnotation)
	}
	rec.Event(&corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		corev1.EventTypeWarning, ReasonSubPathNotRefreshed,
		fmt.Sprintf("SecretProviderClass %s changed, but %s mount it through subPath and keep the old content until restarted; %s",
			class.Name, strings.Join(names, ", "), then))
	return mounts
}
