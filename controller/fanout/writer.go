package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotOurs is returned (wrapped) when the object at a copy's name was
// not written by keymount (it lacks LabelCopy with the writer's name) and
// Writer.Adopt does not take it over: it is reported, never overwritten
// or deleted.
var ErrNotOurs = errors.New("an object of that name exists and keymount did not write it")

// Result says what Writer.Apply did.
type Result int

// Results of Writer.Apply.
const (
	Unchanged Result = iota // the copy was current: no write
	Created                 // a new copy
	Updated                 // an existing copy changed (or a hand edit undone)
	Adopted                 // an object Writer.Adopt accepted is now keymount's copy
)

func (r Result) String() string {
	return [...]string{"Unchanged", "Created", "Updated", "Adopted"}[r]
}

// Writer writes, updates and deletes copies of one writer (Name). A copy
// is a *corev1.Secret or *corev1.ConfigMap; Apply gives it LabelCopy
// (Name) and AnnotationOwner, writes it by server-side apply as
// FieldManager, and never writes over, nor deletes, an object that does
// not carry LabelCopy with its Name (unless Adopt accepts it).
type Writer struct {
	// Name is the LabelCopy value of this writer's copies ("reflector").
	Name string
	// Client writes (uncached reads are not needed: see Live).
	Client client.Client
	// Live reads an object Create found in the way (not in the copies
	// cache because it lacks the label), straight from the API server.
	Live client.Reader
	// Events records ReasonCopyConflict on the owner; nil records nothing.
	Events events.EventRecorder
	// Adopt, when set, decides whether an object keymount did not write
	// may become its copy (reflector's own copies of the same source).
	Adopt func(existing client.Object) bool
	// Volatile are annotations whose value alone never makes a copy
	// out of date (reflector's reflected-at): they are written with the
	// rest, not compared.
	Volatile []string
	// Recent, when set, remembers this writer's writes until the copies
	// cache has them (share it with the CopyHandler of the copies).
	Recent *Recent
	// Metrics, when set, count the writes, deletes, conflicts and
	// failures under the label writer=Name.
	Metrics *Metrics
}

// Apply makes the copy desired (a *corev1.Secret or *corev1.ConfigMap
// with namespace, name, content and the caller's labels and annotations)
// exist as keymount's copy for owner. existing is the object of that name
// in the copies cache (nil when the cache has none). An unchanged copy
// costs no request; a missing one one create; a changed one (a source
// change, a hand edit) one apply, plus one patch when keys must go. To
// write one content into many namespaces, Batch encodes it once.
func (w *Writer) Apply(ctx context.Context, owner, desired, existing client.Object) (Result, error) {
	b, err := w.Batch(owner, desired)
	if err != nil {
		return Unchanged, err
	}
	return b.Apply(ctx, desired.GetNamespace(), existing)
}

// Delete deletes a copy this writer wrote; an object without its label is
// never deleted (ErrNotOurs). One deleted meanwhile is no error.
func (w *Writer) Delete(ctx context.Context, existing client.Object) error {
	if !IsCopy(existing, w.Name) {
		return fmt.Errorf("delete %s %s/%s: %w", kindOf(existing), existing.GetNamespace(), existing.GetName(), ErrNotOurs)
	}
	w.Recent.Forget(existing)
	uid := existing.GetUID()
	err := w.Client.Delete(ctx, existing, client.Preconditions{UID: &uid})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		w.Metrics.failed(w.Name, kindOf(existing), OperationDelete)
		return fmt.Errorf("delete %s %s/%s: %w", kindOf(existing), existing.GetNamespace(), existing.GetName(), err)
	default:
		w.Metrics.removed(w.Name, kindOf(existing))
	}
	return nil
}

// mark adds the label and owner annotation to desired.
func (w *Writer) mark(owner, desired client.Object) {
	l := maps.Clone(desired.GetLabels())
	if l == nil {
		l = map[string]string{}
	}
	l[LabelCopy] = w.Name
	desired.SetLabels(l)
	a := maps.Clone(desired.GetAnnotations())
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationOwner] = owner.GetNamespace() + "/" + owner.GetName()
	desired.SetAnnotations(a)
}

// live reads the object at desired's name from the API server.
func (w *Writer) live(ctx context.Context, desired client.Object) (client.Object, error) {
	obj := newLike(desired)
	key := types.NamespacedName{Namespace: desired.GetNamespace(), Name: desired.GetName()}
	if err := w.Live.Get(ctx, key, obj); err != nil {
		return nil, fmt.Errorf("read %s %s: %w", kindOf(desired), key, err)
	}
	return obj, nil
}

func (w *Writer) conflict(owner, existing client.Object) {
	if w.Events == nil {
		return
	}
	w.Events.Eventf(owner, nil, corev1.EventTypeWarning, ReasonCopyConflict, "Copy",
		"%s %s/%s exists and keymount did not write it (no %s=%s label): left alone, no copy in namespace %s",
		kindOf(existing), existing.GetNamespace(), existing.GetName(), LabelCopy, w.Name, existing.GetNamespace())
}

// current reports whether existing already is desired: same content, and
// every label and annotation desired sets (but Volatile ones) present with
// its value.
func (w *Writer) current(desired, existing client.Object) bool {
	for k, v := range desired.GetLabels() {
		if got, ok := existing.GetLabels()[k]; !ok || got != v {
			return false
		}
	}
	for k, v := range desired.GetAnnotations() {
		if slices.Contains(w.Volatile, k) {
			continue
		}
		if got, ok := existing.GetAnnotations()[k]; !ok || got != v {
			return false
		}
	}
	return sameContent(desired, existing)
}

// dropKeys removes keys from the copy target names by JSON merge patch
// (a null per key; one already gone is no error), answered with its
// metadata; it returns the copy's resourceVersion. Keys of a ConfigMap's
// binaryData come prefixed "binaryData/".
func (w *Writer) dropKeys(ctx context.Context, target client.Object, uid types.UID, keys []string) (string, error) {
	data, bin := map[string]any{}, map[string]any{}
	for _, k := range keys {
		if rest, ok := cutPrefix(k); ok {
			bin[rest] = nil
		} else {
			data[k] = nil
		}
	}
	patch := map[string]any{"metadata": map[string]any{"uid": uid}}
	if len(data) > 0 {
		patch["data"] = data
	}
	if len(bin) > 0 {
		patch["binaryData"] = bin
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return "", err
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kindOf(target)}}
	out.SetNamespace(target.GetNamespace())
	out.SetName(target.GetName())
	if err := w.Client.Patch(ctx, out, client.RawPatch(types.MergePatchType, body), client.FieldOwner(FieldManager)); err != nil {
		return "", fmt.Errorf("drop keys of %s %s/%s: %w", kindOf(target), target.GetNamespace(), target.GetName(), err)
	}
	return out.ResourceVersion, nil
}
