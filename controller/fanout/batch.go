package fanout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Batch is one copy — content, labels, annotations — marked and encoded
// once, to write into many namespaces (Writer.Batch). Safe for concurrent
// use.
type Batch struct {
	w     *Writer
	owner client.Object
	// desired is the marked copy, in no namespace.
	desired client.Object
	// digest covers what makes a copy current: content, labels and the
	// annotations but the Volatile ones (Recent compares it).
	digest string
	// data and binaryData are the content as the apply body carries it.
	data, binaryData json.RawMessage
}

// Batch marks desired (its namespace does not matter) as this writer's
// copy for owner and encodes it, to Apply in many namespaces.
func (w *Writer) Batch(owner, desired client.Object) (*Batch, error) {
	d, ok := desired.DeepCopyObject().(client.Object)
	if !ok || ContentDigest(d) == "" {
		return nil, fmt.Errorf("fanout: a copy is a Secret or a ConfigMap, not %T", desired)
	}
	w.mark(owner, d)
	d.SetNamespace("")
	b := &Batch{w: w, owner: owner, desired: d, digest: w.stateDigest(d)}
	var err error
	switch x := d.(type) {
	case *corev1.Secret:
		b.data, err = rawUnlessEmpty(x.Data)
	case *corev1.ConfigMap:
		if b.data, err = rawUnlessEmpty(x.Data); err == nil {
			b.binaryData, err = rawUnlessEmpty(x.BinaryData)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("fanout: encode %s %s: %w", kindOf(d), d.GetName(), err)
	}
	return b, nil
}

// Apply writes the batch's copy into namespace as Writer.Apply does;
// existing is the object of that name there in the copies cache. The
// writer's Metrics count the write, the conflict or the failure.
func (b *Batch) Apply(ctx context.Context, namespace string, existing client.Object) (Result, error) {
	res, err := b.write(ctx, namespace, existing)
	w, kind := b.w, kindOf(b.desired)
	switch {
	case errors.Is(err, ErrNotOurs):
		w.Metrics.Conflict(w.Name, kind)
	case err != nil:
		w.Metrics.failed(w.Name, kind, OperationWrite)
	default:
		w.Metrics.wrote(w.Name, kind, res)
	}
	return res, err
}

// write is Apply without the metrics.
func (b *Batch) write(ctx context.Context, namespace string, existing client.Object) (Result, error) {
	w := b.w
	key := recentKey{kindOf(b.desired), namespace, b.desired.GetName()}
	if w.Recent.pending(key, b.digest, existing) {
		return Unchanged, nil // written already; the cache has not caught up
	}
	res := Updated
	if existing == nil {
		created, err := b.create(ctx, namespace)
		if err == nil {
			w.Recent.remember(key, created.GetResourceVersion(), b.digest)
			return Created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return Unchanged, err
		}
		if existing, err = w.live(ctx, created); err != nil {
			return Unchanged, err
		}
	}
	if !IsCopy(existing, w.Name) {
		if w.Adopt == nil || existing.GetLabels()[LabelCopy] != "" || !w.Adopt(existing) {
			w.conflict(b.owner, existing)
			return Unchanged, fmt.Errorf("%s %s/%s: %w", kindOf(existing), existing.GetNamespace(), existing.GetName(), ErrNotOurs)
		}
		res = Adopted
	}
	if res != Adopted && w.current(b.desired, existing) {
		return Unchanged, nil
	}
	rv, err := b.apply(ctx, namespace, existing)
	if err != nil {
		return Unchanged, err
	}
	w.Recent.remember(key, rv, b.digest)
	return res, nil
}

// create creates the copy in namespace; the object it returns names it
// (and, created, carries its resourceVersion).
func (b *Batch) create(ctx context.Context, namespace string) (client.Object, error) {
	obj, _ := b.desired.DeepCopyObject().(client.Object)
	obj.SetNamespace(namespace)
	if err := b.w.Client.Create(ctx, obj, client.FieldOwner(FieldManager)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return obj, err
		}
		return obj, fmt.Errorf("create %s %s/%s: %w", kindOf(obj), namespace, obj.GetName(), err)
	}
	return obj, nil
}

// applyBody is a copy's server-side apply configuration, its content
// encoded once per batch.
type applyBody struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   applyMeta       `json:"metadata"`
	Type       string          `json:"type,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	BinaryData json.RawMessage `json:"binaryData,omitempty"`
}

type applyMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	UID         types.UID         `json:"uid"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// apply writes the copy by server-side apply onto existing (by UID: one
// deleted and re-created meanwhile is not taken over), answered with the
// copy's metadata only, then drops the keys another manager keeps that
// the copy does not have (a key added by hand, or one the source lost
// that an earlier writer set). It returns the copy's resourceVersion.
func (b *Batch) apply(ctx context.Context, namespace string, existing client.Object) (string, error) {
	d := b.desired
	body := applyBody{
		APIVersion: "v1", Kind: kindOf(d), Data: b.data, BinaryData: b.binaryData,
		Metadata: applyMeta{Name: d.GetName(), Namespace: namespace, UID: existing.GetUID(),
			Labels: d.GetLabels(), Annotations: d.GetAnnotations()},
	}
	var extra []string
	switch x := d.(type) {
	case *corev1.Secret:
		body.Type = string(x.Type)
		if e, ok := existing.(*corev1.Secret); ok {
			extra = missing(e.Data, x.Data)
		}
	case *corev1.ConfigMap:
		if e, ok := existing.(*corev1.ConfigMap); ok {
			extra = append(missing(e.Data, x.Data), prefixed("binaryData", missing(e.BinaryData, x.BinaryData))...)
		}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return "", err
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: body.Kind}}
	out.SetNamespace(namespace)
	out.SetName(d.GetName())
	if err := b.w.Client.Patch(ctx, out, client.RawPatch(types.ApplyPatchType, raw), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return "", fmt.Errorf("apply %s %s/%s: %w", body.Kind, namespace, d.GetName(), err)
	}
	if len(extra) == 0 {
		return out.ResourceVersion, nil
	}
	target := newLike(d)
	target.SetNamespace(namespace)
	target.SetName(d.GetName())
	return b.w.dropKeys(ctx, target, existing.GetUID(), extra)
}

// stateDigest is the digest of what makes a copy current (Writer.current
// compares the same): content, labels, annotations but Volatile.
func (w *Writer) stateDigest(d client.Object) string {
	a := maps.Clone(d.GetAnnotations())
	for _, k := range w.Volatile {
		delete(a, k)
	}
	parts, err := json.Marshal([]any{ContentDigest(d), d.GetLabels(), a})
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(parts)
	return hex.EncodeToString(sum[:])
}

// rawUnlessEmpty encodes m, or nothing when it is empty.
func rawUnlessEmpty[V any](m map[string]V) (json.RawMessage, error) {
	if len(m) == 0 {
		return nil, nil
	}
	return json.Marshal(m)
}
