package kube

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	secretsyncv1alpha1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

// NewScheme returns the types keymount reads and writes: core/v1 (pods,
// Secrets, events) and keymount's APIs (secrets-store.csi.x-k8s.io/v1 and
// secret-sync.x-k8s.io/v1alpha1), nothing else.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := secretsstorev1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := secretsyncv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// scheme and codecs are the package's own, built once.
var (
	scheme = func() *runtime.Scheme {
		s, err := NewScheme()
		if err != nil {
			panic(fmt.Sprintf("register the driver's API types: %v", err)) // a programming error, caught by any test
		}
		return s
	}()
	codecs         = serializer.NewCodecFactory(scheme)
	parameterCodec = runtime.NewParameterCodec(scheme)
)

// resourceInfo says where the API server serves a kind.
type resourceInfo struct {
	gvk      schema.GroupVersionKind
	resource string // plural, lowercase
}

// GroupResource is the resource's group and name, as errors name it.
func (r resourceInfo) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.gvk.Group, Resource: r.resource}
}

// resources lists every kind the package serves; all are namespaced.
var resources = []resourceInfo{
	{corev1.SchemeGroupVersion.WithKind("Pod"), "pods"},
	{corev1.SchemeGroupVersion.WithKind("Secret"), "secrets"},
	{corev1.SchemeGroupVersion.WithKind("Event"), "events"},
	{secretsstorev1.SchemeGroupVersion.WithKind("SecretProviderClass"), "secretproviderclasses"},
	{secretsstorev1.SchemeGroupVersion.WithKind("SecretProviderClassPodStatus"), "secretproviderclasspodstatuses"},
	{secretsyncv1alpha1.SchemeGroupVersion.WithKind("SecretSync"), secretsyncv1alpha1.Resource},
}

// kindOf returns the group and kind of obj, an object or a list of
// objects (PodList: Pod) of a type the scheme knows.
func kindOf(obj runtime.Object) (schema.GroupKind, error) {
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupKind{}, err
	}
	gk := gvks[0].GroupKind()
	if _, isList := obj.(interface{ GetContinue() string }); isList {
		gk.Kind = trimList(gk.Kind)
	}
	return gk, nil
}

func trimList(kind string) string {
	if n := len(kind) - len("List"); n > 0 && kind[n:] == "List" {
		return kind[:n]
	}
	return kind
}
