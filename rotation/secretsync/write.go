package secretsync

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

// errDeletedWhileSyncing: the Secret was deleted between the two applies.
var errDeletedWhileSyncing = errors.New("the Secret was deleted while it was synced; the next sync creates it")

// current returns the Secret d names, nil when there is none. The cache has
// only Secrets with ManagedLabel: a Secret it lacks is read live, to tell a
// Secret that does not exist from one keymount did not create (or one the
// cache has not seen yet).
func (s *Syncer) current(ctx context.Context, d *desired) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: d.namespace, Name: d.name}
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
	err := s.c.Get(ctx, client.ObjectKey{Namespace: d.namespace, Name: other}, &spc)
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

// write applies what differs between cur (nil: no Secret yet) and d: the
// content as FieldManager, this node's owner references as its node
// manager. It writes nothing when both are current.
func (s *Syncer) write(ctx context.Context, d *desired, cur *corev1.Secret, owners []podOwner) (result, error) {
	r := result{secret: d.name, created: cur == nil}
	var refs []types.UID
	if cur != nil {
		refs = ownerUIDs(cur.OwnerReferences)
	}
	if cur == nil || !upToDate(d, cur) {
		if cur != nil {
			r.changed = dataChanged(cur, d.data)
		}
		cfg := corev1ac.Secret(d.name, d.namespace).
			WithType(d.typ).WithData(d.data).WithLabels(d.labels).WithAnnotations(d.annotations)
		if err := s.c.Apply(ctx, cfg, client.ForceOwnership, client.FieldOwner(FieldManager)); err != nil {
			return r, err
		}
		refs = appliedOwnerUIDs(cfg)
	}
	if hasOwners(refs, owners) {
		return r, nil
	}
	return r, s.applyOwners(ctx, d, owners)
}

// applyOwners applies this node's owner references. Should the Secret have
// been deleted since the content apply, this apply created an empty Secret
// without ManagedLabel, which later syncs would refuse: it is deleted again.
func (s *Syncer) applyOwners(ctx context.Context, d *desired, owners []podOwner) error {
	cfg := corev1ac.Secret(d.name, d.namespace).WithOwnerReferences(ownerReferences(owners)...)
	if err := s.c.Apply(ctx, cfg, client.ForceOwnership, client.FieldOwner(s.nodeManager)); err != nil {
		return err
	}
	if cfg.Labels[ManagedLabel] == "true" || cfg.UID == nil {
		return nil
	}
	stray := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: d.namespace, Name: d.name}}
	if err := s.c.Delete(ctx, stray, client.Preconditions{UID: cfg.UID}); err != nil && !apierrors.IsNotFound(err) {
		return errors.Join(errDeletedWhileSyncing, err)
	}
	return errDeletedWhileSyncing
}

func ownerUIDs(refs []metav1.OwnerReference) []types.UID {
	uids := make([]types.UID, 0, len(refs))
	for _, r := range refs {
		uids = append(uids, r.UID)
	}
	return uids
}

// appliedOwnerUIDs are the owner references of the Secret an apply returned.
func appliedOwnerUIDs(cfg *corev1ac.SecretApplyConfiguration) []types.UID {
	uids := make([]types.UID, 0, len(cfg.OwnerReferences))
	for _, r := range cfg.OwnerReferences {
		if r.UID != nil {
			uids = append(uids, *r.UID)
		}
	}
	return uids
}
