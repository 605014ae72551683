package secretsync

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// Who owns the Secret: External Secrets' target.creationPolicy and
// target.deletionPolicy, as annotations on the SecretSync (its spec is
// upstream's and stays so).
const (
	// AnnotationCreationPolicy is Owner (the default), Orphan, Merge or
	// None.
	AnnotationCreationPolicy = "keymount.io/creation-policy"
	// AnnotationDeletionPolicy is Retain (the default), Delete or Merge:
	// what a sync does when the provider answers that the data is gone
	// (gRPC NotFound).
	AnnotationDeletionPolicy = "keymount.io/deletion-policy"
	// AnnotationSecretSyncUID on a Secret written with creation policy
	// Orphan names the UID of the SecretSync that created it: the proof
	// of ownership that the owner reference gives otherwise, so that a
	// SecretSync still never takes over a Secret it did not create.
	AnnotationSecretSyncUID = "keymount.io/secret-sync-uid" //nolint:gosec // G101: an annotation key, not a credential
)

// Creation policies.
const (
	CreationOwner  = "Owner"
	CreationOrphan = "Orphan"
	CreationMerge  = "Merge"
	CreationNone   = "None"
)

// Deletion policies.
const (
	DeletionRetain = "Retain"
	DeletionDelete = "Delete"
	DeletionMerge  = "Merge"
)

// Reasons of the policies (conditions and events).
const (
	// ReasonMergeTargetMissing (SecretCreated=False, Ready=False; Warning
	// event): creation policy Merge and no Secret of the SecretSync's name
	// exists to merge into. Retried with the sync's backoff.
	ReasonMergeTargetMissing = "MergeTargetMissing"
	// ReasonProviderDataNotFound (SecretUpdated=False, Ready=False;
	// Warning event): the provider answered NotFound and deletion policy
	// Delete deleted the Secret, or Merge removed the SecretSync's keys.
	// Retried with the sync's backoff: data back in the store is written
	// again.
	ReasonProviderDataNotFound = "ProviderDataNotFound"
	// ReasonCreationPolicyNone (Ready=True): creation policy None: the
	// controller writes no Secret and calls no provider.
	ReasonCreationPolicyNone = "CreationPolicyNone"
)

// MessageFormatMergeTargetMissing goes with ReasonMergeTargetMissing: the
// Secret's name and the annotation.
const MessageFormatMergeTargetMissing = "Secret %q does not exist: annotation %s is Merge, which writes keys into an existing Secret and never creates one; " +
	"create the Secret (or set the annotation to Owner or Orphan); retried with backoff"

// MessageCreationPolicyNone goes with ReasonCreationPolicyNone.
const MessageCreationPolicyNone = "annotation " + AnnotationCreationPolicy + " is None: keymount-controller writes no Secret for this SecretSync"

// errNoData: a keymount.io/data-from answer left the Secret no key.
var errNoData = errors.New("the directories of " + AnnotationDataFrom + " hold no file and no other key is written")

// errPolicy marks an invalid creation or deletion policy: the sync fails
// before any store call.
var errPolicy = errors.New("invalid Secret policy")

// policies are the SecretSync's creation and deletion policies.
type policies struct {
	creation string
	deletion string
}

// policiesOf reads and checks the SecretSync's policy annotations; the
// defaults (Owner, Retain) without them. An invalid value or combination
// is an error naming the annotation and the fix.
func policiesOf(ss *ss1.SecretSync) (policies, error) {
	p := policies{creation: CreationOwner, deletion: DeletionRetain}
	if v, ok := ss.Annotations[AnnotationCreationPolicy]; ok {
		switch v = strings.TrimSpace(v); v {
		case CreationOwner, CreationOrphan, CreationMerge, CreationNone:
			p.creation = v
		default:
			return policies{}, fmt.Errorf("%w: annotation %s is %q: set it to Owner (the default), Orphan, Merge or None",
				errPolicy, AnnotationCreationPolicy, v)
		}
	}
	if v, ok := ss.Annotations[AnnotationDeletionPolicy]; ok {
		switch v = strings.TrimSpace(v); v {
		case DeletionRetain, DeletionDelete, DeletionMerge:
			p.deletion = v
		default:
			return policies{}, fmt.Errorf("%w: annotation %s is %q: set it to Retain (the default), Delete or Merge",
				errPolicy, AnnotationDeletionPolicy, v)
		}
	}
	switch {
	case p.deletion == DeletionDelete && (p.creation == CreationMerge || p.creation == CreationNone):
		return policies{}, fmt.Errorf("%w: annotation %s Delete with %s %s: the controller deletes only a Secret it created; "+
			"use %s Retain or Merge, or %s Owner or Orphan", errPolicy, AnnotationDeletionPolicy, AnnotationCreationPolicy, p.creation,
			AnnotationDeletionPolicy, AnnotationCreationPolicy)
	case p.deletion == DeletionMerge && p.creation == CreationNone:
		return policies{}, fmt.Errorf("%w: annotation %s Merge with %s None: there are no keys to remove; use %s Retain",
			errPolicy, AnnotationDeletionPolicy, AnnotationCreationPolicy, AnnotationDeletionPolicy)
	}
	if _, ok := ss.Spec.SecretObject.Annotations[AnnotationSecretSyncUID]; ok {
		return policies{}, fmt.Errorf("%w: spec.secretObject.annotations sets %s, which keymount-controller writes itself: remove it",
			errPolicy, AnnotationSecretSyncUID)
	}
	return p, nil
}

// hashed are the policy annotations syncHash covers (with the template
// annotations): a changed policy is a new version to sync although the
// generation stays. The defaults add nothing, so hashes stay those of
// before.
func (p policies) hashed() map[string]string {
	out := map[string]string{}
	if p.creation != CreationOwner && p.creation != "" {
		out[AnnotationCreationPolicy] = p.creation
	}
	if p.deletion != DeletionRetain && p.deletion != "" {
		out[AnnotationDeletionPolicy] = p.deletion
	}
	return out
}

// owns reports whether the SecretSync may write s under creation policy
// p: Owner and Orphan write a Secret that carries an owner reference to
// the SecretSync or its UID in AnnotationSecretSyncUID (one it created,
// under either policy); Merge writes into any Secret of its name.
func (p policies) owns(ss *ss1.SecretSync, s *corev1.Secret) bool {
	if p.creation == CreationMerge {
		return true
	}
	if s.Annotations[AnnotationSecretSyncUID] == string(ss.UID) && ss.UID != "" {
		return true
	}
	for _, ref := range s.OwnerReferences {
		if ref.UID == ss.UID {
			return true
		}
	}
	return false
}

// ownedAsWanted reports whether s carries the ownership policy p writes:
// Owner, exactly one owner reference, to the SecretSync as controller;
// Orphan, none to it and its UID in AnnotationSecretSyncUID; Merge, none
// to it.
func (p policies) ownedAsWanted(ss *ss1.SecretSync, s *corev1.Secret) bool {
	refersTo := false
	for _, ref := range s.OwnerReferences {
		refersTo = refersTo || ref.UID == ss.UID
	}
	switch p.creation {
	case CreationOrphan:
		return !refersTo && s.Annotations[AnnotationSecretSyncUID] == string(ss.UID)
	case CreationMerge:
		return !refersTo
	default:
		return ownedOnly(ss, s)
	}
}

// dataGone applies deletion policy Delete or Merge after the provider
// answered NotFound (mountErr), or, for Delete, after a
// keymount.io/data-from answer left no key (errNoData): Delete deletes the Secret (one the
// SecretSync created: Owner or Orphan, bound to its UID), Merge removes
// every key the SecretSync wrote (applying none: another field manager's
// keys, and the Secret, stay). The provider's answer is all or nothing, so
// the data gone is all the SecretSync reads. It returns the failure to
// record: Ready=False, retried with backoff, so data back in the store is
// written again.
func (r *Reconciler) dataGone(ctx context.Context, ss *ss1.SecretSync, p policies, existing *corev1.Secret, mountErr error) *failure {
	const format = "the data is gone from the store (%v); annotation %s is %s: %s"
	if existing == nil {
		return newFailure(false, ReasonProviderDataNotFound, ResultProvider, format, mountErr, AnnotationDeletionPolicy, p.deletion,
			fmt.Sprintf("there is no Secret %q to change", ss.Name))
	}
	if p.deletion == DeletionDelete {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ss.Namespace, Name: ss.Name}}
		uid := existing.UID
		err := r.Client.Delete(ctx, s, client.Preconditions{UID: &uid})
		if err != nil && !apierrors.IsNotFound(err) {
			return newFailure(true, ss1.ReasonControllerPatchError, ResultApply, "deleting Secret %q, whose data is gone from the store: %v", ss.Name, err)
		}
		r.Events.Eventf(ss, nil, corev1.EventTypeNormal, ReasonProviderDataNotFound, "Delete",
			"deleted Secret %s: the data is gone from the store and %s is Delete", ss.Name, AnnotationDeletionPolicy)
		return newFailure(true, ReasonProviderDataNotFound, ResultProvider, format, mountErr, AnnotationDeletionPolicy, p.deletion,
			fmt.Sprintf("Secret %q deleted; it is written again when the data is back", ss.Name))
	}
	c := metaContent(ss)
	c.typ = secretType(ss)
	if p.creation == CreationMerge {
		c.typ = existing.Type
	}
	removed := keyList(currentContent(ss, existing).data)
	if err := r.apply(ctx, ss, p, existing, c); err != nil {
		return newFailure(true, ss1.ReasonControllerPatchError, ResultApply, ss1.MessageFormatPatchFailed, ss.Name, err)
	}
	if removed != "" {
		r.Events.Eventf(ss, nil, corev1.EventTypeNormal, ReasonProviderDataNotFound, "Sync",
			"removed keys %s from Secret %s: the data is gone from the store and %s is Merge", removed, ss.Name, AnnotationDeletionPolicy)
	}
	return newFailure(true, ReasonProviderDataNotFound, ResultProvider, format, mountErr, AnnotationDeletionPolicy, p.deletion,
		fmt.Sprintf("the keys this SecretSync wrote are removed from Secret %q, which stays with any other writer's keys; they are written again when the data is back", ss.Name))
}
