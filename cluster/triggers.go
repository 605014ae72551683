package cluster

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/rotation"
)

// TriggerHandler acts on refresh triggers: *driver.Driver.
type TriggerHandler interface {
	// TriggerClass and TriggerPod refresh the held volumes of a class or
	// a pod now; they must not block.
	TriggerClass(namespace, class string)
	TriggerPod(namespace, pod string)
	// HoldsClass reports whether this node has a volume of the class.
	HoldsClass(namespace, class string) bool
}

var _ rotation.Source = (*Cluster)(nil)

// ClassAnnotations returns keymount's annotations of a cached class.
func (c *Cluster) ClassAnnotations(namespace, name string) map[string]string {
	return c.cache.Annotations(&secretsstorev1.SecretProviderClass{}, types.NamespacedName{Namespace: namespace, Name: name})
}

// PodAnnotations returns keymount's annotations of a cached pod of the node.
func (c *Cluster) PodAnnotations(namespace, name string) map[string]string {
	return c.cache.Annotations(&corev1.Pod{}, types.NamespacedName{Namespace: namespace, Name: name})
}

// HandleTriggers makes h hear of every new refresh trigger value on a class
// or a pod of this node, and reports an invalid rotation annotation on a
// class whose volumes this node holds as an event on the class. node is
// the node's default policy, which an invalid annotation leaves in force.
func (c *Cluster) HandleTriggers(h TriggerHandler, node rotation.NodeDefaults) error {
	err := c.cache.OnUpdate(&secretsstorev1.SecretProviderClass{}, func(oldObj, newObj kube.Object) {
		o, n := oldObj.GetAnnotations(), newObj.GetAnnotations()
		if n[rotation.RefreshAnnotation] != o[rotation.RefreshAnnotation] && n[rotation.RefreshAnnotation] != "" {
			h.TriggerClass(newObj.GetNamespace(), newObj.GetName())
		}
		if policyChanged(o, n) && h.HoldsClass(newObj.GetNamespace(), newObj.GetName()) {
			c.reportPolicy(newObj, n, node)
		}
	})
	if err != nil {
		return err
	}
	return c.cache.OnUpdate(&corev1.Pod{}, func(oldObj, newObj kube.Object) {
		o, n := oldObj.GetAnnotations(), newObj.GetAnnotations()
		if n[rotation.RefreshAnnotation] != o[rotation.RefreshAnnotation] && n[rotation.RefreshAnnotation] != "" {
			h.TriggerPod(newObj.GetNamespace(), newObj.GetName())
		}
	})
}

// policyChanged reports whether a class's policy annotations changed.
func policyChanged(o, n map[string]string) bool {
	policy := func(k string, _ string) bool {
		return !strings.HasPrefix(k, rotation.AnnotationPrefix) || k == rotation.RefreshAnnotation || k == rotation.RestartAnnotation
	}
	a, b := maps.Clone(o), maps.Clone(n)
	maps.DeleteFunc(a, policy)
	maps.DeleteFunc(b, policy)
	return !maps.Equal(a, b)
}

// reportPolicy records a warning on the class for each invalid rotation
// annotation it now has.
func (c *Cluster) reportPolicy(obj kube.Object, annotations map[string]string, node rotation.NodeDefaults) {
	_, problems := rotation.ForClass(annotations, node)
	if len(problems) == 0 {
		return
	}
	ref := &corev1.ObjectReference{
		APIVersion: secretsstorev1.SchemeGroupVersion.String(), Kind: "SecretProviderClass",
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
	}
	for _, p := range problems {
		c.events.recorder.Event(ref, corev1.EventTypeWarning, ReasonInvalidRotationAnnotation, p.Error())
		klog.InfoS("invalid rotation annotation on a class", "spc", klog.KObj(obj), "problem", p.Error())
	}
}
