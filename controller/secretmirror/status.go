package secretmirror

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
)

// setStatus writes o into m's status when it says something new: another
// mirrorStatus or message, a new generation, copies written, a new lease
// or a new version written to Vault.
// lastSyncTime moves on every such write but a Pending one.
func (r *Reconciler) setStatus(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, o outcome) error {
	st := m.Status
	sameLease := !o.setVaultSource || equality.Semantic.DeepEqual(st.VaultSource, o.vaultSource)
	sameDest := o.vaultDestination == nil || equality.Semantic.DeepEqual(st.VaultDestination, o.vaultDestination)
	if st.MirrorStatus == o.status && st.Message == o.message && st.ObservedGeneration == m.Generation && !o.wrote && sameLease && sameDest {
		return nil
	}
	patch := client.MergeFrom(m.DeepCopy())
	if o.setVaultSource {
		m.Status.VaultSource = o.vaultSource
	}
	if o.vaultDestination != nil {
		m.Status.VaultDestination = o.vaultDestination
	}
	m.Status.MirrorStatus = o.status
	m.Status.Message = o.message
	m.Status.ObservedGeneration = m.Generation
	if o.status != mirrorsv1alpha2.MirrorStatusPending {
		now := metav1.Now()
		m.Status.LastSyncTime = &now
	}
	return client.IgnoreNotFound(r.client.Status().Patch(ctx, m, patch))
}
