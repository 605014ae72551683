package secretsync

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// apply writes c into the SecretSync's Secret by server-side apply, as
// creation policy p says: Owner, with the SecretSync as its one owner;
// Orphan, with no owner reference but the SecretSync's UID in
// AnnotationSecretSyncUID; Merge, c's keys, labels and annotations only
// (no type, no owner). What FieldManager wrote before and c leaves out is
// removed; another field manager's fields stay. An existing Secret is
// applied to by UID: one deleted and re-created by someone else meanwhile
// is not taken over (the API server answers Conflict).
func (r *Reconciler) apply(ctx context.Context, ss *ss1.SecretSync, p policies, existing *corev1.Secret, c *content) error {
	cfg := corev1ac.Secret(ss.Name, ss.Namespace).
		WithData(c.data).
		WithLabels(c.labels)
	annotations := maps.Clone(c.annotations)
	switch p.creation {
	case CreationMerge:
		// The Secret is another's: its type is not the SecretSync's to set.
	case CreationOrphan:
		cfg.WithType(c.typ)
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[AnnotationSecretSyncUID] = string(ss.UID)
	default:
		cfg.WithType(c.typ).
			WithOwnerReferences(metav1ac.OwnerReference().
				WithAPIVersion(ss1.SchemeGroupVersion.String()).
				WithKind("SecretSync").
				WithName(ss.Name).
				WithUID(ss.UID).
				WithController(true))
	}
	if len(annotations) > 0 {
		cfg.WithAnnotations(annotations)
	}
	if existing != nil {
		cfg.WithUID(existing.UID)
	}
	return r.Client.Apply(ctx, cfg, client.FieldOwner(FieldManager), client.ForceOwnership)
}
