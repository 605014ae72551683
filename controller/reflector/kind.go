package reflector

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kind is what differs between reflecting Secrets and ConfigMaps.
type Kind struct {
	name     string // "Secret"
	resource schema.GroupVersionResource
	newObj   func() client.Object
	newList  func() client.ObjectList
	items    func(client.ObjectList) []client.Object
	// content copies what reflector copies: a Secret's type and data, a
	// ConfigMap's data and binaryData; labels only as AnnotationCopyLabels
	// asks.
	content func(src client.Object, ns, name string) client.Object
}

// Secrets and ConfigMaps.
var (
	Secrets = Kind{
		name:     "Secret",
		resource: corev1.SchemeGroupVersion.WithResource("secrets"),
		newObj:   func() client.Object { return &corev1.Secret{} },
		newList:  func() client.ObjectList { return &corev1.SecretList{} },
		items: func(l client.ObjectList) []client.Object {
			if sl, ok := l.(*corev1.SecretList); ok {
				return pointers(sl.Items)
			}
			return nil
		},
		content: func(src client.Object, ns, name string) client.Object {
			out := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: copiedLabels(src)}}
			if s, ok := src.(*corev1.Secret); ok {
				out.Type, out.Data = s.Type, maps.Clone(s.Data)
			}
			return out
		},
	}
	ConfigMaps = Kind{
		name:     "ConfigMap",
		resource: corev1.SchemeGroupVersion.WithResource("configmaps"),
		newObj:   func() client.Object { return &corev1.ConfigMap{} },
		newList:  func() client.ObjectList { return &corev1.ConfigMapList{} },
		items: func(l client.ObjectList) []client.Object {
			if cl, ok := l.(*corev1.ConfigMapList); ok {
				return pointers(cl.Items)
			}
			return nil
		},
		content: func(src client.Object, ns, name string) client.Object {
			out := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: copiedLabels(src)}}
			if c, ok := src.(*corev1.ConfigMap); ok {
				out.Data, out.BinaryData = maps.Clone(c.Data), maps.Clone(c.BinaryData)
			}
			return out
		},
	}
)

// pointers returns the items of a list as objects: a pointer to each, not
// a copy.
func pointers[T any, P interface {
	*T
	client.Object
}](items []T) []client.Object {
	out := make([]client.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}
