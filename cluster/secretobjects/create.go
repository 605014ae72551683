package secretobjects

import (
	"context"
	"encoding/json"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// create creates the Secret d asks for, stamped mine, with this node's
// owners, in one request: a Secret keymount creates has an owner from its
// first moment, so no failure can leave it without one. A create fails
// when the Secret exists (isRace): another node created it since it was
// read, and its content is compared first.
//
// A create is no apply: its fields belong to an update entry of
// NodeFieldManager, which an apply would never take them from, so that a key
// the class stops listing would stay. The first write to the Secret after
// it (write) therefore relabels them first, handing them to the apply
// entries a sync by applies would have made; upToDate already counts them
// as NodeFieldManager's. A Secret that never changes costs its create alone.
func (s *Syncer) create(ctx context.Context, d *desired, owners []owner, mine stamp) (result, error) {
	annotations := maps.Clone(d.annotations)
	maps.Copy(annotations, mine.annotations())
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: d.namespace, Name: d.name,
			Labels: d.labels, Annotations: annotations, OwnerReferences: ownerReferences(owners),
		},
		Type: d.typ,
		Data: d.data,
	}
	if err := s.c.Create(ctx, sec, NodeFieldManager); err != nil {
		return result{secret: d.name}, err
	}
	return result{secret: d.name, created: true}, nil
}

// relabel hands the fields of the update entry keymount's create left on
// cur to NodeFieldManager's apply entry, and its owner references to the
// manager of the node that created it (creatorManager; see relabelled), by
// writing the managed
// fields (the API server takes them as written). It returns cur as
// written, or as it was when there is nothing to hand over. write calls it
// before it applies anything.
func (s *Syncer) relabel(ctx context.Context, cur *corev1.Secret) (*corev1.Secret, error) {
	entries, ok, err := relabelled(cur.ManagedFields, creatorManager(cur, s.nodeManager))
	if err != nil || !ok {
		return cur, err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": cur.ResourceVersion, "managedFields": entries,
	}})
	if err != nil {
		return cur, err
	}
	out := cur.DeepCopy()
	if err := s.c.Patch(ctx, out, types.MergePatchType, patch, NodeFieldManager); err != nil {
		return cur, err
	}
	return out, nil
}

// creatorManager is the manager of the node whose create cur still shows:
// the content stamp's node, which only an apply (after the relabel) can
// change. own when the stamp names no node.
func creatorManager(cur *corev1.Secret, own string) string {
	if node := cur.Annotations[ContentNodeAnnotation]; node != "" {
		return nodeManager(node)
	}
	return own
}
