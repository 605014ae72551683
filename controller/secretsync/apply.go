package secretsync

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// apply writes c into the SecretSync's Secret by server-side apply, with
// the SecretSync as its one owner. An existing Secret is applied to by
// UID: one deleted and re-created by someone else meanwhile is not taken
// over (the API server answers Conflict).
func (r *Reconciler) apply(ctx context.Context, ss *ss1.SecretSync, existing *corev1.Secret, c *content) error {
	cfg := corev1ac.Secret(ss.Name, ss.Namespace).
		WithType(c.typ).
		WithData(c.data).
		WithLabels(c.labels).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion(ss1.SchemeGroupVersion.String()).
			WithKind("SecretSync").
			WithName(ss.Name).
			WithUID(ss.UID).
			WithController(true))
	if len(c.annotations) > 0 {
		cfg.WithAnnotations(c.annotations)
	}
	if existing != nil {
		cfg.WithUID(existing.UID)
	}
	return r.Client.Apply(ctx, cfg, client.FieldOwner(FieldManager), client.ForceOwnership)
}
