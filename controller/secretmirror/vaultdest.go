package secretmirror

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/controller/push"
	"github.com/keymount/keymount/internal/vaultkv"
)

// pushes keeps, per SecretMirror with a Vault destination, what keymount
// last wrote there (vaultkv.Mark: its KV version and digest) and the KV
// version of the engine. status.vaultDestination keeps the version across
// restarts; the digest lives here only (a restart costs one read of the
// version keymount wrote).
type pushes struct {
	mu    sync.Mutex
	marks map[types.NamespacedName]pushed
}

type pushed struct {
	addr, path string
	kv         int
	mark       vaultkv.Mark
}

func newPushes() *pushes { return &pushes{marks: map[types.NamespacedName]pushed{}} }

func (p *pushes) forget(key types.NamespacedName) {
	p.mu.Lock()
	delete(p.marks, key)
	p.mu.Unlock()
}

// last is what keymount wrote at addr/path for m: from memory, else from
// m's status (version only).
func (p *pushes) last(m *mirrorsv1alpha2.SecretMirror, addr, path string) pushed {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w, ok := p.marks[client.ObjectKeyFromObject(m)]; ok && w.addr == addr && w.path == path {
		return w
	}
	w := pushed{addr: addr, path: path}
	if st := m.Status.VaultDestination; st != nil && st.Addr == addr && strings.Trim(st.Path, "/") == path {
		w.mark.Version = st.Version
	}
	return w
}

func (p *pushes) record(key types.NamespacedName, w pushed) {
	p.mu.Lock()
	p.marks[key] = w
	p.mu.Unlock()
}

// pushToVault writes src's data to m's Vault destination as mirrors does
// (the fields under data, values base64) with m's login: a check-and-set
// against the version keymount last wrote on KV version 2, a value
// identical to src's adopted without a write, none when nothing changed,
// and never over a value keymount did not write unless m carries
// AnnotationVaultOverwrite. The Secret's type goes into the path's
// custom_metadata (vaultkv.MetadataSecretType). Nothing is ever deleted from
// Vault (mirrors' deletePolicy retain).
func (r *Reconciler) pushToVault(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, src *corev1.Secret, from origin) (outcome, error) {
	dv := m.Spec.Destination.Vault
	path := strings.Trim(dv.Path, "/")
	if len(src.Data) == 0 {
		msg := fmt.Sprintf("%s has no data: nothing to write to Vault %s", from.name, dv.Path)
		r.events.Eventf(m, nil, corev1.EventTypeWarning, EventMirrorVaultError, "Sync", "%s", msg)
		return outcome{status: mirrorsv1alpha2.MirrorStatusError, message: msg}, nil
	}
	policy := vaultkv.OwnedOnly
	if m.Annotations[AnnotationVaultOverwrite] == "true" {
		policy = vaultkv.Replace
	}
	key := client.ObjectKeyFromObject(m)
	w := r.pushes.last(m, dv.Addr, path)
	var res vaultkv.Result
	err := r.vault.withVault(ctx, m, dv, "spec.destination.vault", func(c *vaultapi.Client, l *vaultLogin) error {
		if w.kv == 0 {
			v, err := vaultkv.MountVersion(ctx, c, path)
			if err != nil {
				return fmt.Errorf("as %s: %w", l.role, err)
			}
			w.kv = v
		}
		mark, r, err := vaultkv.KV{Client: c, Path: path, Version: w.kv}.Put(ctx, vaultkv.Value{Data: src.Data, Type: src.Type}, w.mark, policy)
		if err != nil && !errors.Is(err, vaultkv.ErrConflict) {
			return fmt.Errorf("as %s: %w", l.role, err)
		}
		w.mark, res = mark, r
		return err
	})
	conflict := errors.Is(err, vaultkv.ErrConflict)
	r.metrics.Pushed(push.Store(w.kv), res, err, conflict)
	switch {
	case conflict:
		msg := fmt.Sprintf("%s not written to Vault: %v; to replace that value, annotate the SecretMirror %s=true, or point spec.destination.vault.path elsewhere",
			from.name, err, AnnotationVaultOverwrite)
		r.events.Eventf(m, nil, corev1.EventTypeWarning, EventMirrorVaultConflict, "Sync", "%s", msg)
		return outcome{status: mirrorsv1alpha2.MirrorStatusError, message: msg, retry: true}, nil
	case err != nil:
		msg := err.Error()
		r.events.Eventf(m, nil, corev1.EventTypeWarning, EventMirrorVaultError, "Sync", "%s", msg)
		return outcome{status: mirrorsv1alpha2.MirrorStatusError, message: msg, retry: !errors.Is(err, errVaultSpec)}, nil
	}
	r.pushes.record(key, w)
	where := "Vault " + dv.Path
	if w.kv == 2 {
		where += fmt.Sprintf(" (version %d)", w.mark.Version)
	}
	if res.Wrote() || res == vaultkv.Adopted {
		r.events.Eventf(m, nil, corev1.EventTypeNormal, EventMirrorSynced, "Sync", "Synced %s to %s (%s)", from.name, where, res)
	}
	return outcome{status: mirrorsv1alpha2.MirrorStatusActive, message: fmt.Sprintf("%s written to %s", from.name, where),
		wrote:            res != vaultkv.Unchanged,
		vaultDestination: &mirrorsv1alpha2.VaultDestinationStatus{Addr: dv.Addr, Path: dv.Path, Version: w.mark.Version},
	}, nil
}
