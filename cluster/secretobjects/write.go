package secretobjects

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

// current returns the Secret d names, nil when there is none. The cache has
// only Secrets with ManagedLabel: a Secret it lacks is read live, to tell a
// Secret that does not exist from one keymount did not create (or one the
// cache has not seen yet).
func (s *Syncer) current(ctx context.Context, d *desired) (*corev1.Secret, error) {
	key := types.NamespacedName{Namespace: d.namespace, Name: d.name}
	var cur corev1.Secret
	err := s.r.Get(ctx, key, &cur)
	if apierrors.IsNotFound(err) {
		err = s.c.Get(ctx, key, &cur)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return &cur, nil
}

// refusal says why cur must not be written, if it must not.
func (s *Syncer) refusal(ctx context.Context, d *desired, cur *corev1.Secret) (result, bool) {
	if cur.Labels[ManagedLabel] != "true" {
		return failure(d.name, ReasonNotManaged, fmt.Sprintf(
			"Secret %q exists and keymount did not create it (no label %s=true), so class %q does not write it: "+
				"delete the Secret, give it another secretName in the class, or label it %s=true to hand it over to keymount",
			d.name, ManagedLabel, d.class, ManagedLabel)), true
	}
	if other := cur.Annotations[ClassAnnotation]; other != "" && other != d.class {
		claimed, err := s.claimedBy(ctx, d, other)
		if err != nil {
			return apiFailure(d, fmt.Sprintf("read class %q that claims", other), err), true
		}
		if claimed {
			return failure(d.name, ReasonClaimedByOtherClass, fmt.Sprintf(
				"Secret %q is synced by class %q, which also lists it, so class %q does not write it: "+
					"give the Secret another secretName in one of the classes, or remove it from class %q",
				d.name, other, d.class, other)), true
		}
	}
	if cur.Type != d.typ {
		return failure(d.name, ReasonTypeMismatch, fmt.Sprintf(
			"Secret %q has type %q and class %q asks for %q; the type of a Secret cannot change: "+
				"delete the Secret and keymount creates it with the new type at the next sync",
			d.name, cur.Type, d.class, d.typ)), true
	}
	return result{}, false
}

// claimedBy reports whether class other, which the Secret's ClassAnnotation
// names, still exists and still lists the Secret. A claim of a class that is
// gone or dropped the Secret is taken over.
func (s *Syncer) claimedBy(ctx context.Context, d *desired, other string) (bool, error) {
	var spc secretsstorev1.SecretProviderClass
	err := s.c.Get(ctx, types.NamespacedName{Namespace: d.namespace, Name: other}, &spc)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return slices.ContainsFunc(spc.Spec.SecretObjects, func(so *secretsstorev1.SecretObject) bool {
		return so != nil && so.SecretName == d.name
	}), nil
}

// live reads the Secret d names from the API server, nil when there is none.
func (s *Syncer) live(ctx context.Context, d *desired) (*corev1.Secret, error) {
	var cur corev1.Secret
	err := s.c.Get(ctx, types.NamespacedName{Namespace: d.namespace, Name: d.name}, &cur)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &cur, nil
}

// isRace reports whether a write failed because the Secret changed since it
// was read: it was modified (resourceVersion), deleted or recreated (uid),
// or created by someone else. The sync reads it again and decides anew.
func isRace(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err)
}

// write brings cur (nil: no Secret yet) to what d asks for, unless its
// content is newer than mine, and makes sure it has this node's owners.
// Every write is conditional on the Secret read (cur's resourceVersion or
// uid, or its absence): a race fails it (isRace).
func (s *Syncer) write(ctx context.Context, d *desired, cur *corev1.Secret, owners []owner, mine stamp) (result, error) {
	if cur == nil {
		return s.create(ctx, d, owners, mine)
	}
	r := result{secret: d.name}
	content := !upToDate(d, cur)
	if content {
		if rec := recordedStamp(cur); !mine.mayReplace(rec, s.settle) {
			r.kept = keptMessage(d.name, mine, rec, s.settle)
			content = false
		}
	}
	ownersMissing := !hasOwners(cur.OwnerReferences, owners)
	if !content && !ownersMissing {
		r.unchanged = true
		return r, nil // nothing to write
	}
	// The create's fields go to the apply entries before any apply.
	cur, err := s.relabel(ctx, cur)
	if err != nil {
		return r, err
	}
	version := cur.ResourceVersion
	if content {
		changed := dataChanged(cur, d.data)
		if version, err = s.applyContent(ctx, d, cur, mine); err != nil {
			return r, err
		}
		r.changed = changed
	}
	if !ownersMissing {
		return r, nil
	}
	return r, s.applyOwners(ctx, d, cur, version, owners)
}

// applyContent applies d and the stamp mine as NodeFieldManager, on the Secret
// cur exactly (same uid and resourceVersion), and returns the new
// resourceVersion.
func (s *Syncer) applyContent(ctx context.Context, d *desired, cur *corev1.Secret, mine stamp) (string, error) {
	annotations := maps.Clone(d.annotations)
	maps.Copy(annotations, mine.annotations())
	typ := d.typ
	cfg := newSecretApply(d, cur.UID)
	cfg.Metadata.ResourceVersion = cur.ResourceVersion
	cfg.Type, cfg.Data, cfg.Metadata.Labels, cfg.Metadata.Annotations = &typ, d.data, d.labels, annotations
	out, err := s.apply(ctx, cfg, NodeFieldManager)
	if err != nil {
		return "", err
	}
	return out.ResourceVersion, nil
}

// applyOwners applies, as this node's manager, the references to owners
// and to every owner it applied before (keptOwners), on the Secret cur
// (same uid: an apply never creates a Secret) at resourceVersion version,
// so that two volumes of this node, which share its manager, never apply
// over each other's owners.
func (s *Syncer) applyOwners(ctx context.Context, d *desired, cur *corev1.Secret, version string, owners []owner) error {
	all := append(keptOwners(cur, s.nodeManager), owners...)
	slices.SortFunc(all, func(a, b owner) int { return strings.Compare(string(a.uid), string(b.uid)) })
	all = slices.CompactFunc(all, func(a, b owner) bool { return a.uid == b.uid })
	cfg := newSecretApply(d, cur.UID)
	cfg.Metadata.ResourceVersion = version
	cfg.Metadata.OwnerReferences = ownerApplyConfigs(all)
	_, err := s.apply(ctx, cfg, s.nodeManager)
	return err
}
