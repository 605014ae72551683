package secretmirror

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
)

// syncVault copies m's Vault secret into every matching namespace, as a
// Secret named source.name of type Opaque whose keys are the secret's
// fields. A secret that cannot be read is an Error naming the path, who
// logged in and Vault's message (retried unless the spec must change);
// nothing at the path is Pending, as a missing source Secret is.
func (r *Reconciler) syncVault(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, s spec) (outcome, error) {
	val, err := r.vault.read(ctx, m)
	switch {
	case errors.Is(err, errVaultNotFound):
		return r.sourceMissing(ctx, m, s, "Vault secret "+m.Spec.Source.Vault.Path)
	case err != nil:
		msg := err.Error()
		r.events.Eventf(m, nil, corev1.EventTypeWarning, EventMirrorVaultError, "Sync", "%s", msg)
		return outcome{status: mirrorsv1alpha2.MirrorStatusError, message: msg, retry: !errors.Is(err, errVaultSpec)}, nil
	}
	src := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: s.sourceName, ResourceVersion: val.version},
		Type:       corev1.SecretTypeOpaque,
		Data:       val.data,
	}
	return r.fanOut(ctx, m, s, src, origin{typ: mirrorsv1alpha2.SourceTypeVault, name: "Vault secret " + m.Spec.Source.Vault.Path})
}
