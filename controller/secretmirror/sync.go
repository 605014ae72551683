package secretmirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/controller/fanout"
)

// outcome is what one sync found, for the status and the requeue.
type outcome struct {
	status  mirrorsv1alpha2.MirrorStatus
	message string
	// wrote: copies were created, updated or deleted.
	wrote bool
	// retry: a write failed and is worth retrying soon.
	retry bool
	// vaultSource (set when setVaultSource) is a Vault source's lease,
	// nil for none; vaultDestination, when set, what keymount wrote to a
	// Vault destination.
	vaultSource      *mirrorsv1alpha2.VaultSourceStatus
	setVaultSource   bool
	vaultDestination *mirrorsv1alpha2.VaultDestinationStatus
}

// sync writes the copies of the source into every matching namespace and
// removes the ones in namespaces that no longer match.
func (r *Reconciler) sync(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, s spec, name types.NamespacedName) (outcome, error) {
	src := &corev1.Secret{}
	if err := r.live.Get(ctx, name, src); err != nil {
		if !apierrors.IsNotFound(err) {
			return outcome{}, fmt.Errorf("source Secret %s: %w", name, err)
		}
		return r.sourceMissing(ctx, m, s, "Secret "+name.String())
	}
	from := origin{typ: mirrorsv1alpha2.SourceTypeSecret, name: "Secret " + name.String()}
	if s.vaultDestination {
		return r.pushToVault(ctx, m, src, from)
	}
	return r.fanOut(ctx, m, s, src, from)
}

// origin says where a copy comes from: mirrors' source-type annotation,
// the name messages give it and, for a Vault source, its path and lease
// (mirrors' vault-* annotations).
type origin struct {
	typ       mirrorsv1alpha2.SourceType
	name      string
	vaultPath string
	lease     *mirrorsv1alpha2.VaultSourceStatus
}

// fanOut writes src into every matching namespace and removes the copies
// in namespaces that no longer match.
func (r *Reconciler) fanOut(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, s spec, src *corev1.Secret, from origin) (outcome, error) {
	namespaces, err := r.matching(ctx, s.match, m.Namespace)
	if err != nil {
		return outcome{}, err
	}
	var written, notOwned []string
	failed := map[string]error{}
	stale := 0
	for _, ns := range namespaces {
		w, err := r.writeCopy(ctx, m, desired(m, src, from, ns))
		switch {
		case errors.Is(err, fanout.ErrNotOurs):
			notOwned = append(notOwned, ns)
		case err != nil:
			failed[ns] = err
		case w.wrote:
			written = append(written, ns)
			if w.stale {
				stale++
			}
		}
	}
	if len(failed) == 0 && stale > 0 {
		// The source's change reached its last copy (a Vault source,
		// without managedFields, is not timed).
		r.writer.Metrics.Propagated(Writer, fanout.ChangedAt(src), time.Now())
	}
	deleted, err := r.prune(ctx, m, func(ns string) bool { return slices.Contains(namespaces, ns) })
	if err != nil {
		return outcome{}, err
	}
	if len(written) > 0 {
		r.events.Eventf(m, nil, corev1.EventTypeNormal, EventMirrorSynced, "Sync",
			"Synced %s to namespaces (%d written: %s)", from.name, len(written), abbreviate(written))
	}
	o := outcome{status: mirrorsv1alpha2.MirrorStatusActive, wrote: len(written) > 0 || deleted > 0,
		message: fmt.Sprintf("%s copied to %d namespaces", from.name, len(namespaces)-len(notOwned)-len(failed))}
	var problems []string
	if len(notOwned) > 0 {
		msg := fmt.Sprintf("Secret %s exists in namespaces %s and was not written by keymount: not overwritten; delete or rename it to receive the copy",
			src.Name, abbreviate(notOwned))
		problems = append(problems, msg)
		o.retry = true // no event tells when that Secret goes
	}
	if len(failed) > 0 {
		msg := "Unable to sync some objects: " + describeFailures(failed)
		r.events.Eventf(m, nil, corev1.EventTypeWarning, EventMirrorError, "Sync", "%s", msg)
		problems = append(problems, msg)
		o.retry = true
	}
	if len(problems) > 0 {
		o.status, o.message = mirrorsv1alpha2.MirrorStatusError, strings.Join(problems, "; ")
	}
	return o, nil
}

// sourceMissing reports a missing source (Pending, as mirrors does) and,
// with deletePolicy delete, removes the copies keymount wrote of it.
func (r *Reconciler) sourceMissing(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, s spec, what string) (outcome, error) {
	r.events.Eventf(m, nil, corev1.EventTypeWarning, EventMirrorNoSecret, "Sync", "%s not found, waiting to appear", what)
	o := outcome{status: mirrorsv1alpha2.MirrorStatusPending, message: fmt.Sprintf("%s not found, waiting to appear", what)}
	if s.deletePolicy == mirrorsv1alpha2.DeletePolicyRetain {
		return o, nil
	}
	deleted, err := r.prune(ctx, m, func(string) bool { return false })
	o.wrote = deleted > 0
	return o, err
}

// matching lists the namespaces that receive a copy: those m matches, not
// terminating, and not the source's own.
func (r *Reconciler) matching(ctx context.Context, m matcher, sourceNS string) ([]string, error) {
	list := fanout.NamespaceMetaList()
	if err := r.copies.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	var out []string
	for _, ns := range list.Items {
		if ns.Name != sourceNS && ns.DeletionTimestamp.IsZero() && m.matches(ns.Name) {
			out = append(out, ns.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// wrote says what writeCopy did: wrote the copy, and whether the copy it
// replaced was written from an older version of the source.
type wrote struct{ wrote, stale bool }

// writeCopy makes want m's current copy.
func (r *Reconciler) writeCopy(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, want *corev1.Secret) (wrote, error) {
	var existing client.Object
	cur := &corev1.Secret{}
	switch err := r.copies.Get(ctx, client.ObjectKeyFromObject(want), cur); {
	case err == nil && fanout.IsCopy(cur, Writer) && cur.Annotations[fanout.AnnotationOwner] != owner(m):
		// Another SecretMirror's copy: never taken over (they would flap).
		r.events.Eventf(m, nil, corev1.EventTypeWarning, fanout.ReasonCopyConflict, "Copy",
			"Secret %s/%s is the copy of SecretMirror %s: left alone, no copy in namespace %s",
			cur.Namespace, cur.Name, cur.Annotations[fanout.AnnotationOwner], cur.Namespace)
		r.writer.Metrics.Conflict(Writer, "Secret")
		return wrote{}, fmt.Errorf("copy %s/%s of another SecretMirror: %w", cur.Namespace, cur.Name, fanout.ErrNotOurs)
	case err == nil:
		existing = cur
	case !apierrors.IsNotFound(err):
		return wrote{}, err
	}
	w := r.writer
	w.Adopt = adopts(m)
	res, err := w.Apply(ctx, m, want, existing)
	if err != nil || res == fanout.Unchanged {
		return wrote{}, err
	}
	return wrote{wrote: true, stale: fanout.Stale(existing, want, AnnotationParentVersion)}, nil
}

// prune deletes the copies m owns in namespaces keep refuses; it returns
// how many it deleted.
func (r *Reconciler) prune(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, keep func(ns string) bool) (int, error) {
	list := &corev1.SecretList{}
	if err := fanout.CopiesOf(ctx, r.copies, list, Writer, m.Namespace, m.Name); err != nil {
		return 0, fmt.Errorf("list the copies of %s: %w", owner(m), err)
	}
	var deleted []string
	for i := range list.Items {
		c := &list.Items[i]
		if keep(c.Namespace) {
			continue
		}
		if err := r.writer.Delete(ctx, c); err != nil {
			return len(deleted), err
		}
		deleted = append(deleted, c.Namespace)
	}
	if len(deleted) > 0 {
		klog.V(2).InfoS("deleted copies", "secretMirror", klog.KObj(m), "namespaces", len(deleted))
		r.events.Eventf(m, nil, corev1.EventTypeNormal, EventMirrorCopiesDeleted, "Delete",
			"Deleted the copies in %d namespaces: %s", len(deleted), abbreviate(deleted))
	}
	return len(deleted), nil
}

// abbreviate joins up to 5 names, then says how many more.
func abbreviate(names []string) string {
	const most = 5
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}

// describeFailures names the failing namespaces with the first error.
func describeFailures(failed map[string]error) string {
	var names []string
	for ns := range failed {
		names = append(names, ns)
	}
	slices.Sort(names)
	return fmt.Sprintf("namespaces %s: %v", abbreviate(names), failed[names[0]])
}
