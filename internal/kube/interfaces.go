package kube

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Object is an API object of a kind the package serves, such as
// *corev1.Pod.
type Object interface {
	metav1.Object
	runtime.Object
}

// ObjectList is a list of such objects, such as *corev1.PodList.
type ObjectList interface {
	metav1.ListInterface
	runtime.Object
}

// ListOptions select the objects a List returns. The zero value selects
// every object of the kind in every namespace.
type ListOptions struct {
	// Namespace limits the list to one namespace.
	Namespace string
	// Labels and Fields, when set, select by label and by field.
	Labels labels.Selector
	Fields fields.Selector
	// Limit, when positive, bounds the number of objects returned.
	Limit int64
}

// Reader reads objects. Get fills obj, whose type says the kind, with the
// object namespace/name; List fills list with the objects opts select.
// A missing object is apierrors.IsNotFound.
type Reader interface {
	Get(ctx context.Context, key types.NamespacedName, obj Object) error
	List(ctx context.Context, list ObjectList, opts ListOptions) error
}

// Writer writes objects. Each call sends one request and, except Delete,
// fills obj with the object the API server answers.
type Writer interface {
	// Create creates obj; fieldManager, when set, names the manager of
	// its fields.
	Create(ctx context.Context, obj Object, fieldManager string) error
	// Update replaces obj; it fails with a conflict when obj's
	// resourceVersion is not the stored one.
	Update(ctx context.Context, obj Object) error
	// Delete deletes obj when the stored object meets pre (nil: always).
	Delete(ctx context.Context, obj Object, pre *metav1.Preconditions) error
	// Patch patches obj (its namespace and name) with data of type pt.
	Patch(ctx context.Context, obj Object, pt types.PatchType, data []byte, fieldManager string) error
	// Apply sends config, a server-side apply configuration in JSON, for
	// the object obj names, as fieldManager, taking over the fields
	// other managers own (force).
	Apply(ctx context.Context, obj Object, config []byte, fieldManager string) error
}

// Client reads and writes.
type Client interface {
	Reader
	Writer
}
