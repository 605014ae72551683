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
	// ConfigMap's data and binaryData; never labels.
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
			sl, ok := l.(*corev1.SecretList)
			if !ok {
				return nil
			}
			out := make([]client.Object, len(sl.Items))
			for i := range sl.Items {
				out[i] = &sl.Items[i]
			}
			return out
		},
		content: func(src client.Object, ns, name string) client.Object {
			out := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
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
			cl, ok := l.(*corev1.ConfigMapList)
			if !ok {
				return nil
			}
			out := make([]client.Object, len(cl.Items))
			for i := range cl.Items {
				out[i] = &cl.Items[i]
			}
			return out
		},
		content: func(src client.Object, ns, name string) client.Object {
			out := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			if c, ok := src.(*corev1.ConfigMap); ok {
				out.Data, out.BinaryData = maps.Clone(c.Data), maps.Clone(c.BinaryData)
			}
			return out
		},
	}
)
