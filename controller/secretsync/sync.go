package secretsync

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/provider/providerclient"
)

// Results of a sync, as the sync counter labels them.
const (
	ResultCreated   = "created"
	ResultUpdated   = "updated"
	ResultUnchanged = "unchanged"
	ResultConflict  = "conflict"
	ResultInvalid   = "invalid"
	ResultClass     = "class_error"
	ResultToken     = "token_error"
	ResultProvider  = "provider_error"
	ResultContent   = "content_error"
	ResultApply     = "apply_error"
	ResultHash      = "hash_error"
)

// synced is a successful sync.
type synced struct {
	// written is the content applied, as digests; nil when the Secret
	// already held it.
	written *content
	// old is the Secret's content before; nil when it was created.
	old     *content
	hash    string
	objects []ss1.SecretSyncObject
}

// sync fetches the SecretSync's objects and writes its Secret when it
// differs, as its policies p say. existing is the Secret the SecretSync
// may write (policies.owns), nil when there is none.
func (r *Reconciler) sync(ctx context.Context, ss *ss1.SecretSync, p policies, class *secretsstorev1.SecretProviderClass, existing *corev1.Secret) (*synced, *failure) {
	created := existing != nil
	if f := checkReserved(ss, created); f != nil {
		return nil, f
	}
	dirs, err := dataFromDirs(ss)
	if err != nil { // before any store call
		return nil, newFailure(created, ss1.ReasonControllerSyncError, ResultInvalid, "%v", err)
	}
	if p.creation == CreationMerge && existing == nil {
		return nil, newFailure(false, ReasonMergeTargetMissing, ResultInvalid, MessageFormatMergeTargetMissing, ss.Name, AnnotationCreationPolicy)
	}
	tok, err := r.Tokens.Tokens(ctx, ss.Namespace, ss.Spec.ServiceAccountName, r.cfg.Audiences)
	if err != nil {
		return nil, newFailure(created, ss1.ReasonControllerSyncError, ResultToken, ss1.MessageFormatFetchFailed,
			fmt.Errorf("token for service account %q: %w", ss.Spec.ServiceAccountName, err))
	}
	req, err := syncrequest.Build(syncrequest.Input{
		Parameters: class.Spec.Parameters, Namespace: ss.Namespace, ServiceAccountName: ss.Spec.ServiceAccountName,
		Pod: r.cfg.Pod, Tokens: tok, Current: currentVersions(ss),
	})
	if err != nil {
		return nil, newFailure(created, ss1.ReasonControllerSyncError, ResultToken, ss1.MessageFormatFetchFailed, err)
	}
	provider := string(class.Spec.Provider)
	start := r.Clock.Now()
	resp, err := r.Providers.Mount(ctx, provider, req)
	r.Metrics.ProviderCall(provider, status.Code(err), r.Clock.Since(start))
	if err != nil {
		return nil, r.mountFailed(ctx, ss, p, class, existing, err)
	}
	want, err := desiredContent(ss, resp.GetFiles())
	if err != nil {
		return nil, contentFailure(created, err)
	}
	h, err := r.Hashes.Hasher(ctx)
	if err != nil {
		klog.ErrorS(err, "no syncHash key", "secretSync", klog.KObj(ss))
		return nil, newFailure(created, ss1.ReasonControllerSyncError, ResultHash, "%s", ss1.MessageHashFailed)
	}
	if len(dirs) > 0 && len(want.data) == 0 && p.deletion == DeletionDelete {
		// Every secret the directories held is gone from the store: ESO's
		// Delete deletes the Secret when no data is left.
		return nil, r.dataGone(ctx, ss, p, existing, errNoData)
	}
	if p.creation == CreationMerge {
		want.typ = existing.Type // another's Secret: its type stays
	}
	// Compared and hashed as digests, the form of the cached Secret.
	wantDigests := want.digested()
	out := &synced{hash: h.Sum(hashContent(ss, class, wantDigests)), objects: objectsOf(resp.GetObjectVersion())}
	if existing != nil {
		out.old = currentContent(ss, existing)
		// The Secret is compared on the keys wanted now; a key the spec or
		// a template annotation no longer names is removed by applying
		// without it, so a new hash (spec, class or templates changed)
		// applies even when the wanted keys hold their values.
		if out.old.equal(wantDigests) && p.ownedAsWanted(ss, existing) && out.hash == ss.Status.SyncHash {
			return out, nil
		}
	}
	if err := r.apply(ctx, ss, p, existing, want); err != nil {
		return nil, newFailure(created, ss1.ReasonControllerPatchError, ResultApply, ss1.MessageFormatPatchFailed, ss.Name, err)
	}
	out.written = wantDigests
	return out, nil
}

// contentFailure is the failure of building the Secret's content from the
// provider's answer.
func contentFailure(created bool, err error) *failure {
	switch {
	case errors.Is(err, errDataFrom):
		return newFailure(created, ss1.ReasonControllerSyncError, ResultInvalid, "%v", err)
	case errors.Is(err, errTemplate):
		return newFailure(created, ReasonTemplateError, ResultContent, MessageFormatTemplateFailed, err)
	default:
		return newFailure(created, ss1.ReasonRemoteSecretStoreFetchFailed, ResultContent, ss1.MessageFormatFetchFailed, err)
	}
}

// mountFailed is the failure of a failed Mount call. The provider's
// NotFound (the data is gone from the store) first applies a deletion
// policy other than Retain (dataGone).
func (r *Reconciler) mountFailed(ctx context.Context, ss *ss1.SecretSync, p policies, class *secretsstorev1.SecretProviderClass, existing *corev1.Secret, err error) *failure {
	created := existing != nil
	if errors.Is(err, providerclient.ErrProviderNotFound) {
		return newFailure(created, ss1.ReasonSecretProviderClassMisconfigured, ResultClass, ss1.MessageFormatClassNotFound, class.Name, err)
	}
	if status.Code(err) == codes.NotFound && p.deletion != DeletionRetain {
		return r.dataGone(ctx, ss, p, existing, err)
	}
	return newFailure(created, ss1.ReasonProviderError, ResultProvider, ss1.MessageFormatFetchFailed, err)
}

// checkReserved refuses spec labels and annotations under the controller's
// own key, as v0.0.5 does.
func checkReserved(ss *ss1.SecretSync, created bool) *failure {
	if _, ok := ss.Spec.SecretObject.Labels[ss1.LabelSecretSync]; ok {
		return newFailure(created, ss1.ReasonInvalidClusterSecretLabel, ResultInvalid, ss1.MessageFormatReservedLabel, ss1.LabelSecretSync)
	}
	if _, ok := ss.Spec.SecretObject.Annotations[ss1.LabelSecretSync]; ok {
		return newFailure(created, ss1.ReasonInvalidClusterSecretAnnotation, ResultInvalid, ss1.MessageFormatReservedAnnotation, ss1.LabelSecretSync)
	}
	return nil
}

// currentVersions are the object versions of the last successful sync.
func currentVersions(ss *ss1.SecretSync) map[string]string {
	if len(ss.Status.Objects) == 0 {
		return nil
	}
	m := make(map[string]string, len(ss.Status.Objects))
	for _, o := range ss.Status.Objects {
		m[o.ID] = o.Version
	}
	return m
}

// objectVersion is what the provider response's object versions offer.
type objectVersion interface {
	GetId() string
	GetVersion() string
}

// objectsOf turns the provider's object versions into status.objects, by id.
func objectsOf[V objectVersion](versions []V) []ss1.SecretSyncObject {
	out := make([]ss1.SecretSyncObject, 0, len(versions))
	for _, v := range versions {
		out = append(out, ss1.SecretSyncObject{ID: v.GetId(), Version: v.GetVersion()})
	}
	slices.SortFunc(out, func(a, b ss1.SecretSyncObject) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return out
}

// ownedOnly reports whether s carries exactly one owner reference: the
// SecretSync, as controller.
func ownedOnly(ss *ss1.SecretSync, s *corev1.Secret) bool {
	refs := s.OwnerReferences
	return len(refs) == 1 && refs[0].UID == ss.UID && refs[0].Controller != nil && *refs[0].Controller
}

// readyFor reports whether ss says Ready=True for its generation.
func readyFor(ss *ss1.SecretSync) bool {
	c := meta.FindStatusCondition(ss.Status.Conditions, ss1.ConditionReady)
	return c != nil && c.Status == "True" && c.ObservedGeneration == ss.Generation
}
