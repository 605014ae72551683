package secretmirror

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/push"
)

// syncVault copies m's Vault secret into every matching namespace, or to
// its Vault destination, as a Secret named source.name whose keys are the
// secret's fields, of the type a push recorded (Opaque when none). A
// secret that cannot be read is an Error naming the path, who logged in
// and Vault's message (retried unless the spec must change); nothing at
// the path is Pending, as a missing source Secret is. A dynamic secret's
// lease goes into status.vaultSource and the copies' annotations.
func (r *Reconciler) syncVault(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, s spec) (outcome, error) {
	if lease := m.Status.VaultSource; lease != nil && lease.LeaseID != "" && !r.vault.known(client.ObjectKeyFromObject(m)) {
		r.seedLease(ctx, m, lease)
	}
	val, err := r.vault.read(ctx, m, s.period)
	switch {
	case errors.Is(err, errVaultNotFound):
		return r.sourceMissing(ctx, m, s, "Vault secret "+m.Spec.Source.Vault.Path)
	case err != nil:
		msg := err.Error()
		r.events.Eventf(m, nil, corev1.EventTypeWarning, EventMirrorVaultError, "Sync", "%s", msg)
		return outcome{status: mirrorsv1alpha2.MirrorStatusError, message: msg, retry: !errors.Is(err, errVaultSpec)}, nil
	}
	switch {
	case val.renewed:
		r.metrics.Lease(push.LeaseRenewed)
		r.events.Eventf(m, nil, corev1.EventTypeNormal, EventMirrorVaultLeaseRenew, "Renew", "Renewed lease successfully")
	case val.issued:
		r.metrics.Lease(push.LeaseIssued)
		r.events.Eventf(m, nil, corev1.EventTypeNormal, EventMirrorVaultNewCreds, "Read", "Fetched new credentials under the lease %s", val.lease.LeaseID)
	}
	src := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: s.sourceName, ResourceVersion: val.version},
		Type:       val.secretType,
		Data:       val.data,
	}
	from := origin{typ: mirrorsv1alpha2.SourceTypeVault, name: "Vault secret " + m.Spec.Source.Vault.Path,
		vaultPath: m.Spec.Source.Vault.Path, lease: val.lease}
	var o outcome
	if s.vaultDestination {
		o, err = r.pushToVault(ctx, m, src, from)
	} else {
		o, err = r.fanOut(ctx, m, s, src, from)
	}
	o.vaultSource, o.setVaultSource = val.lease, true
	return o, err
}

// seedLease hands the Vault reader, after a restart, the credentials m's
// copies hold under the lease m's status names: that lease is renewed at
// the next read instead of new credentials issued. Without such a copy
// (none written yet, or a Vault destination), the next read issues new
// ones.
func (r *Reconciler) seedLease(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, lease *mirrorsv1alpha2.VaultSourceStatus) {
	list := &corev1.SecretList{}
	if err := fanout.CopiesOf(ctx, r.copies, list, Writer, m.Namespace, m.Name); err != nil {
		return
	}
	for i := range list.Items {
		c := &list.Items[i]
		if c.Annotations[AnnotationVaultLeaseID] != lease.LeaseID {
			continue
		}
		// The cache keeps the copies' digests, not their data: the
		// credentials are read from the API server.
		live := &corev1.Secret{}
		if err := r.live.Get(ctx, client.ObjectKeyFromObject(c), live); err != nil || live.Annotations[AnnotationVaultLeaseID] != lease.LeaseID || len(live.Data) == 0 {
			return
		}
		r.vault.seed(client.ObjectKeyFromObject(m), m.Spec.Source.Vault.Addr, m.Spec.Source.Vault.Path, lease, live)
		return
	}
}
