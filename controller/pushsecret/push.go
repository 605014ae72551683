package pushsecret

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pushv1alpha1 "github.com/keymount/keymount/apis/push/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/push"
	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/providerclient"
)

// outcome is what one push found, for the status and the requeue.
type outcome struct {
	ready           bool
	reason, message string
	// pushed, when set, is the new status.pushed.
	pushed    []pushv1alpha1.PushedValue
	setPushed bool
	// synced is the source Secret's resourceVersion pushed.
	synced string
	// retry: worth trying again soon.
	retry bool
}

func notReady(reason, format string, args ...any) outcome {
	return outcome{reason: reason, message: fmt.Sprintf(format, args...)}
}

// itemKey names one value of a PushSecret: its store object and property.
func itemKey(objectType, remoteKey, property string) string {
	return objectType + "\x00" + remoteKey + "\x00" + property
}

func pushedKey(p pushv1alpha1.PushedValue) string {
	return itemKey(p.ObjectType, p.RemoteKey, p.Property)
}

// push writes ps's values through its class's provider and says what
// became of them.
func (r *Reconciler) push(ctx context.Context, ps *pushv1alpha1.PushSecret) (outcome, error) {
	if err := validate(ps); err != nil {
		return notReady(ReasonInvalid, "%v", err), nil
	}
	secret := &corev1.Secret{}
	name := types.NamespacedName{Namespace: ps.Namespace, Name: ps.Spec.Selector.Secret.Name}
	if err := r.Live.Get(ctx, name, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return notReady(ReasonSecretMissing, "Secret %s not found: nothing is pushed until it exists", name), nil
		}
		return outcome{}, err
	}
	values, err := valuesOf(ps, secret)
	if err != nil {
		return notReady(ReasonKeyMissing, "%v; nothing is pushed", err), nil
	}
	class, o := r.class(ctx, ps)
	if class == nil {
		return o, nil
	}
	if err := pathsAllowed(class, ps); err != nil {
		return notReady(ReasonPathNotAllowed, "%v; nothing is pushed", err), nil
	}
	key := client.ObjectKeyFromObject(ps)
	last := map[string]pushv1alpha1.PushedValue{}
	for _, p := range ps.Status.Pushed {
		last[pushedKey(p)] = p
	}
	policy := keymountv1.UpdatePolicy_UPDATE_POLICY_REPLACE
	switch {
	case ps.Annotations[pushv1alpha1.AnnotationOverwrite] == "true":
		policy = keymountv1.UpdatePolicy_UPDATE_POLICY_OVERWRITE
	case ps.Spec.UpdatePolicy == pushv1alpha1.UpdatePolicyIfNotExists:
		policy = keymountv1.UpdatePolicy_UPDATE_POLICY_IF_NOT_EXISTS
	}
	items := make([]*keymountv1.PushItem, len(ps.Spec.Data))
	sums := make([][sha256.Size]byte, len(ps.Spec.Data))
	for i, d := range ps.Spec.Data {
		k := itemKey(d.ObjectType, d.Match.RemoteRef.RemoteKey, d.Match.RemoteRef.Property)
		sums[i] = sha256.Sum256(values[i])
		prev := last[k]
		items[i] = &keymountv1.PushItem{
			RemoteKey: d.Match.RemoteRef.RemoteKey, Property: d.Match.RemoteRef.Property, ObjectType: d.ObjectType,
			Value: values[i], Policy: policy, LastVersion: prev.Version, Owner: key.String(),
			Unchanged: prev.Version != "" && r.digests.same(key, k, sums[i]),
		}
	}
	attrs, o := r.attributes(ctx, ps, class)
	if attrs == "" {
		return o, nil
	}
	provider := string(class.Spec.Provider)
	results, err := r.Providers.Push(ctx, provider, &keymountv1.PushRequest{Attributes: attrs, Secrets: "{}", Items: items})
	if err != nil {
		return r.callFailed(ps, provider, err), nil
	}
	o = r.apply(ps, class, last, items, results, sums)
	o.synced = secret.ResourceVersion
	r.removeUnnamed(ctx, ps, class, attrs, &o)
	return o, nil
}

// validate refuses a spec naming one value twice.
func validate(ps *pushv1alpha1.PushSecret) error {
	seen := map[string]int{}
	for i, d := range ps.Spec.Data {
		k := itemKey(d.ObjectType, d.Match.RemoteRef.RemoteKey, d.Match.RemoteRef.Property)
		if j, ok := seen[k]; ok {
			return fmt.Errorf("spec.data[%d] and spec.data[%d] both push to remoteKey %q property %q: give each value its own remote key or property",
				j, i, d.Match.RemoteRef.RemoteKey, d.Match.RemoteRef.Property)
		}
		seen[k] = i
	}
	if len(ps.Spec.Data) == 0 {
		return errors.New("spec.data is empty: name at least one value to push")
	}
	return nil
}

// valuesOf is the bytes each data entry pushes: the Secret's key, or the
// whole Secret as a JSON object of its keys (ESO's, when secretKey is
// empty).
func valuesOf(ps *pushv1alpha1.PushSecret, s *corev1.Secret) ([][]byte, error) {
	out := make([][]byte, len(ps.Spec.Data))
	for i, d := range ps.Spec.Data {
		if d.Match.SecretKey != "" {
			v, ok := s.Data[d.Match.SecretKey]
			if !ok {
				return nil, fmt.Errorf("spec.data[%d].match.secretKey %q is not a key of Secret %s/%s (it has %s)",
					i, d.Match.SecretKey, s.Namespace, s.Name, strings.Join(slices.Sorted(maps.Keys(s.Data)), ", "))
			}
			out[i] = v
			continue
		}
		whole := make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			if !utf8.Valid(v) {
				return nil, fmt.Errorf("spec.data[%d] pushes the whole Secret as JSON, but its key %q is not UTF-8: push that key alone with match.secretKey", i, k)
			}
			whole[k] = string(v)
		}
		b, err := json.Marshal(whole)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// pathsAllowed checks ps's remote keys against the prefixes class's
// keymount.io/push-paths lists, as the admission policy does: each must
// start with one and hold no "..". A class without it allows any.
func pathsAllowed(class *secretsstorev1.SecretProviderClass, ps *pushv1alpha1.PushSecret) error {
	list, ok := class.Annotations[pushv1alpha1.AnnotationPushPaths]
	if !ok {
		return nil
	}
	var prefixes []string
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p != "" {
			prefixes = append(prefixes, p)
		}
	}
	for i, d := range ps.Spec.Data {
		k := d.Match.RemoteRef.RemoteKey
		if strings.Contains(k, "..") || !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
			return fmt.Errorf("spec.data[%d].match.remoteRef.remoteKey %q is outside what SecretProviderClass %s allows (%s: %s)",
				i, k, class.Name, pushv1alpha1.AnnotationPushPaths, strings.Join(prefixes, ", "))
		}
	}
	return nil
}

// class reads ps's SecretProviderClass; nil and the outcome when it is
// missing.
func (r *Reconciler) class(ctx context.Context, ps *pushv1alpha1.PushSecret) (*secretsstorev1.SecretProviderClass, outcome) {
	class := &secretsstorev1.SecretProviderClass{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ps.Namespace, Name: ps.Spec.SecretProviderClassName}, class)
	switch {
	case apierrors.IsNotFound(err):
		o := notReady(ReasonClassMissing, "SecretProviderClass %s/%s not found (spec.secretProviderClassName)", ps.Namespace, ps.Spec.SecretProviderClassName)
		o.retry = true
		return nil, o
	case err != nil:
		o := notReady(ReasonPushFailed, "read SecretProviderClass %s/%s: %v", ps.Namespace, ps.Spec.SecretProviderClassName, err)
		o.retry = true
		return nil, o
	}
	return class, outcome{}
}

// attributes is the JSON of the request's attributes (the class's
// parameters, ps's ServiceAccount and its tokens); "" and the outcome when
// no token can be had. It holds tokens: never logged.
func (r *Reconciler) attributes(ctx context.Context, ps *pushv1alpha1.PushSecret, class *secretsstorev1.SecretProviderClass) (string, outcome) {
	sa := serviceAccount(ps)
	var tok string
	if len(r.Audiences) > 0 {
		var err error
		if tok, err = r.Tokens.Tokens(ctx, ps.Namespace, sa, r.Audiences); err != nil {
			o := notReady(ReasonPushFailed, "a token of ServiceAccount %s/%s (spec.serviceAccountName): %v", ps.Namespace, sa, err)
			o.retry = true
			return "", o
		}
	}
	attrs, err := syncrequest.Attributes(syncrequest.Input{Parameters: class.Spec.Parameters, Namespace: ps.Namespace,
		ServiceAccountName: sa, Pod: r.Pod, Tokens: tok})
	if err != nil {
		return "", notReady(ReasonPushFailed, "%v", err)
	}
	b, err := json.Marshal(attrs)
	if err != nil {
		return "", notReady(ReasonPushFailed, "encode the attributes: %v", err)
	}
	return string(b), outcome{}
}

func serviceAccount(ps *pushv1alpha1.PushSecret) string {
	if ps.Spec.ServiceAccountName == "" {
		return "default"
	}
	return ps.Spec.ServiceAccountName
}

// callFailed is the outcome of a request the provider did not answer
// item by item.
func (r *Reconciler) callFailed(ps *pushv1alpha1.PushSecret, provider string, err error) outcome {
	var o outcome
	switch {
	case status.Code(err) == codes.Unimplemented:
		o = notReady(ReasonProviderDoesNotPush, "provider %q does not push (it serves no keymount.provider.v1.SecretPusher); keymount's aws and vault providers do", provider)
	case errors.Is(err, providerclient.ErrProviderNotFound):
		o = notReady(ReasonPushFailed, "%v", err)
		o.retry = true
	default:
		o = notReady(ReasonPushFailed, "push through provider %q: %v", provider, err)
		o.retry = true
	}
	r.Metrics.PushSecretCall(push.ResultError)
	r.Events.Eventf(ps, nil, corev1.EventTypeWarning, ReasonPushFailed, "Push", "%s", o.message)
	return o
}

// apply turns the provider's results into the new status.pushed, events
// and metrics; prev is what status.pushed held, by itemKey.
func (r *Reconciler) apply(ps *pushv1alpha1.PushSecret, class *secretsstorev1.SecretProviderClass, prev map[string]pushv1alpha1.PushedValue,
	items []*keymountv1.PushItem, results []*keymountv1.ItemResult, sums [][sha256.Size]byte) outcome {
	key := client.ObjectKeyFromObject(ps)
	var pushed []pushv1alpha1.PushedValue
	var conflicts, failures []string
	counts := map[keymountv1.Outcome]int{}
	for i, res := range results {
		it := items[i]
		k := itemKey(it.GetObjectType(), it.GetRemoteKey(), it.GetProperty())
		counts[res.GetOutcome()]++
		r.Metrics.PushSecretResult(store(string(class.Spec.Provider), it.GetObjectType()), outcomeLabel(res.GetOutcome()))
		switch res.GetOutcome() {
		case keymountv1.Outcome_OUTCOME_CREATED, keymountv1.Outcome_OUTCOME_UPDATED, keymountv1.Outcome_OUTCOME_ADOPTED, keymountv1.Outcome_OUTCOME_UNCHANGED:
			pushed = append(pushed, pushv1alpha1.PushedValue{RemoteKey: it.GetRemoteKey(), Property: it.GetProperty(),
				ObjectType: it.GetObjectType(), Version: res.GetVersion()})
			r.digests.set(key, k, sums[i])
			continue
		case keymountv1.Outcome_OUTCOME_CONFLICT:
			conflicts = append(conflicts, describe(it, res))
		case keymountv1.Outcome_OUTCOME_SKIPPED:
		default:
			failures = append(failures, describe(it, res))
		}
		if p, ok := prev[k]; ok {
			pushed = append(pushed, p) // what keymount wrote before stays its own
		}
	}
	o := outcome{ready: true, reason: ReasonSynced, pushed: pushed, setPushed: true,
		message: fmt.Sprintf("%d values pushed through SecretProviderClass %s", len(items)-counts[keymountv1.Outcome_OUTCOME_SKIPPED], class.Name)}
	if n := counts[keymountv1.Outcome_OUTCOME_SKIPPED]; n > 0 {
		o.message += fmt.Sprintf("; %d left as found (updatePolicy IfNotExists)", n)
	}
	if wrote := counts[keymountv1.Outcome_OUTCOME_CREATED] + counts[keymountv1.Outcome_OUTCOME_UPDATED] + counts[keymountv1.Outcome_OUTCOME_ADOPTED]; wrote > 0 {
		r.Events.Eventf(ps, nil, corev1.EventTypeNormal, EventPushed, "Push", "Pushed %d values through SecretProviderClass %s (created %d, updated %d, adopted %d)",
			wrote, class.Name, counts[keymountv1.Outcome_OUTCOME_CREATED], counts[keymountv1.Outcome_OUTCOME_UPDATED], counts[keymountv1.Outcome_OUTCOME_ADOPTED])
	}
	if len(failures) > 0 {
		o.ready, o.reason, o.retry = false, ReasonPushFailed, true
		o.message = "not pushed: " + strings.Join(failures, "; ")
		r.Events.Eventf(ps, nil, corev1.EventTypeWarning, ReasonPushFailed, "Push", "%s", o.message)
	}
	if len(conflicts) > 0 {
		msg := fmt.Sprintf("not replaced: %s; to replace values keymount did not write, annotate the PushSecret %s=true",
			strings.Join(conflicts, "; "), pushv1alpha1.AnnotationOverwrite)
		r.Events.Eventf(ps, nil, corev1.EventTypeWarning, ReasonPushConflict, "Push", "%s", msg)
		o.retry = true
		if o.ready {
			o.ready, o.reason, o.message = false, ReasonPushConflict, msg
		} else {
			o.message += "; " + msg
		}
	}
	return o
}

// describe names an item and the provider's message (never a value).
func describe(it *keymountv1.PushItem, res *keymountv1.ItemResult) string {
	what := it.GetRemoteKey()
	if it.GetProperty() != "" {
		what += " property " + it.GetProperty()
	}
	if res.GetMessage() == "" {
		return what
	}
	return what + ": " + res.GetMessage()
}

// removeUnnamed removes, with deletionPolicy Delete, the values keymount
// pushed that ps no longer names; with None it forgets them. o.pushed
// keeps those that could not be removed yet.
func (r *Reconciler) removeUnnamed(ctx context.Context, ps *pushv1alpha1.PushSecret, class *secretsstorev1.SecretProviderClass, attrs string, o *outcome) {
	named := map[string]bool{}
	for _, d := range ps.Spec.Data {
		named[itemKey(d.ObjectType, d.Match.RemoteRef.RemoteKey, d.Match.RemoteRef.Property)] = true
	}
	var gone []pushv1alpha1.PushedValue
	for _, p := range ps.Status.Pushed {
		if !named[pushedKey(p)] {
			gone = append(gone, p)
		}
	}
	if len(gone) == 0 || ps.Spec.DeletionPolicy != pushv1alpha1.DeletionPolicyDelete {
		return
	}
	kept, err := r.remove(ctx, ps, class, attrs, gone)
	if err != nil {
		o.retry = true
	}
	o.pushed = append(o.pushed, kept...)
}

// remove asks the provider to remove values keymount pushed; it returns
// those to try again (the provider failed on them).
func (r *Reconciler) remove(ctx context.Context, ps *pushv1alpha1.PushSecret, class *secretsstorev1.SecretProviderClass, attrs string, values []pushv1alpha1.PushedValue) ([]pushv1alpha1.PushedValue, error) {
	items := make([]*keymountv1.PushItem, len(values))
	for i, p := range values {
		items[i] = &keymountv1.PushItem{RemoteKey: p.RemoteKey, Property: p.Property, ObjectType: p.ObjectType,
			LastVersion: p.Version, Owner: client.ObjectKeyFromObject(ps).String()}
	}
	provider := string(class.Spec.Provider)
	results, err := r.Providers.Remove(ctx, provider, &keymountv1.RemoveRequest{Attributes: attrs, Secrets: "{}", Items: items})
	if err != nil {
		r.Events.Eventf(ps, nil, corev1.EventTypeWarning, ReasonPushFailed, "Remove", "remove through provider %q: %v", provider, err)
		return values, err
	}
	var kept []pushv1alpha1.PushedValue
	var removed, left, failed []string
	for i, res := range results {
		r.Metrics.PushSecretResult(store(provider, items[i].GetObjectType()), outcomeLabel(res.GetOutcome()))
		switch res.GetOutcome() {
		case keymountv1.Outcome_OUTCOME_REMOVED:
			removed = append(removed, describe(items[i], &keymountv1.ItemResult{}))
		case keymountv1.Outcome_OUTCOME_CONFLICT:
			left = append(left, describe(items[i], res))
		default:
			failed = append(failed, describe(items[i], res))
			kept = append(kept, values[i])
		}
	}
	if len(removed) > 0 {
		r.Events.Eventf(ps, nil, corev1.EventTypeNormal, EventRemoved, "Remove", "Removed %d values keymount pushed: %s", len(removed), strings.Join(removed, ", "))
	}
	if len(left) > 0 {
		r.Events.Eventf(ps, nil, corev1.EventTypeWarning, EventRemoveSkipped, "Remove", "Left in the store, written by someone else since: %s", strings.Join(left, "; "))
	}
	if len(failed) > 0 {
		r.Events.Eventf(ps, nil, corev1.EventTypeWarning, ReasonPushFailed, "Remove", "Not removed: %s", strings.Join(failed, "; "))
		return kept, fmt.Errorf("remove: %s", strings.Join(failed, "; "))
	}
	return kept, nil
}

// finalize removes, with deletionPolicy Delete, what keymount pushed, then
// the finalizer. A class that is gone leaves the values (an event says so):
// a namespace being deleted never waits on its store.
func (r *Reconciler) finalize(ctx context.Context, ps *pushv1alpha1.PushSecret) error {
	if !controllerutil.ContainsFinalizer(ps, pushv1alpha1.Finalizer) {
		return nil
	}
	if ps.Spec.DeletionPolicy == pushv1alpha1.DeletionPolicyDelete && len(ps.Status.Pushed) > 0 {
		class, o := r.class(ctx, ps)
		switch {
		case class == nil && o.reason == ReasonClassMissing:
			r.Events.Eventf(ps, nil, corev1.EventTypeWarning, EventRemoveSkipped, "Remove", "%s: the values keymount pushed are left in the store", o.message)
		case class == nil:
			return errors.New(o.message)
		default:
			attrs, o := r.attributes(ctx, ps, class)
			if attrs == "" {
				return errors.New(o.message)
			}
			if _, err := r.remove(ctx, ps, class, attrs, ps.Status.Pushed); err != nil {
				return err
			}
		}
	}
	patch := client.MergeFrom(ps.DeepCopy())
	controllerutil.RemoveFinalizer(ps, pushv1alpha1.Finalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, ps, patch))
}

// setStatus writes o into ps's status when it says something new.
func (r *Reconciler) setStatus(ctx context.Context, ps *pushv1alpha1.PushSecret, o outcome) error {
	before := ps.DeepCopy()
	cond := metav1.Condition{Type: pushv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: o.reason, Message: o.message,
		ObservedGeneration: ps.Generation}
	if o.ready {
		cond.Status = metav1.ConditionTrue
		now := metav1.Now()
		ps.Status.RefreshTime = &now
	}
	apimeta.SetStatusCondition(&ps.Status.Conditions, cond)
	ps.Status.ObservedGeneration = ps.Generation
	if o.setPushed {
		ps.Status.Pushed = o.pushed
	}
	if o.synced != "" && o.ready {
		ps.Status.SyncedResourceVersion = o.synced
	}
	cmp := ps.Status.DeepCopy()
	cmp.RefreshTime = before.Status.RefreshTime
	if equality.Semantic.DeepEqual(*cmp, before.Status) {
		return nil // nothing new but the time: no write
	}
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, ps, client.MergeFrom(before)))
}

// store is the metrics' store label: from a fixed set, never the class's
// provider name as written.
func store(provider, objectType string) string {
	switch {
	case provider == "aws" && objectType == "ssmparameter":
		return push.StoreAWSSSM
	case provider == "aws":
		return push.StoreAWSSecretsManager
	case provider == "vault":
		return push.StoreVault
	}
	return push.StoreOther
}

func outcomeLabel(o keymountv1.Outcome) string {
	switch o {
	case keymountv1.Outcome_OUTCOME_CREATED:
		return "created"
	case keymountv1.Outcome_OUTCOME_UPDATED:
		return "updated"
	case keymountv1.Outcome_OUTCOME_ADOPTED:
		return "adopted"
	case keymountv1.Outcome_OUTCOME_UNCHANGED:
		return "unchanged"
	case keymountv1.Outcome_OUTCOME_SKIPPED:
		return "skipped"
	case keymountv1.Outcome_OUTCOME_CONFLICT:
		return push.ResultConflict
	case keymountv1.Outcome_OUTCOME_REMOVED:
		return push.ResultRemoved
	}
	return push.ResultError
}
