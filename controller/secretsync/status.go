package secretsync

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// failure is a failed sync: the condition it sets (SecretCreated before the
// Secret exists, SecretUpdated after), its reason and message.
type failure struct {
	condition string
	reason    string
	message   string
	// result is the sync counter's result label.
	result string
}

func (f *failure) Error() string { return f.reason + ": " + f.message }

// newFailure builds the failure of a step; created says whether the Secret
// exists, which decides the condition.
func newFailure(created bool, reason, result, format string, args ...any) *failure {
	cond := ss1.ConditionSecretCreated
	if created {
		cond = ss1.ConditionSecretUpdated
	}
	return &failure{condition: cond, reason: reason, message: fmt.Sprintf(format, args...), result: result}
}

// setCondition sets one condition for the SecretSync's generation.
func setCondition(st *ss1.SecretSyncStatus, gen int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
	})
}

// initConditions gives a SecretSync without conditions v0.0.5's starting
// ones.
func initConditions(st *ss1.SecretSyncStatus, gen int64) {
	if meta.FindStatusCondition(st.Conditions, ss1.ConditionSecretCreated) == nil {
		setCondition(st, gen, ss1.ConditionSecretCreated, metav1.ConditionUnknown, ss1.ReasonSyncStarting, "")
	}
	if meta.FindStatusCondition(st.Conditions, ss1.ConditionSecretUpdated) == nil {
		setCondition(st, gen, ss1.ConditionSecretUpdated, metav1.ConditionUnknown, ss1.ReasonNoUpdatesAttemptedYet, "")
	}
}

// successStatus is the status after a successful sync. created says the
// Secret was created by this sync.
func successStatus(old ss1.SecretSyncStatus, gen int64, hash string, objects []ss1.SecretSyncObject, handled string, created bool) ss1.SecretSyncStatus {
	st := *old.DeepCopy()
	initConditions(&st, gen)
	if created {
		setCondition(&st, gen, ss1.ConditionSecretCreated, metav1.ConditionTrue, ss1.ReasonCreateSuccessful, ss1.MessageCreateSuccessful)
	} else {
		c := meta.FindStatusCondition(st.Conditions, ss1.ConditionSecretCreated)
		if c.Status != metav1.ConditionTrue {
			// A Secret this SecretSync owns exists (made before a
			// failure, or by another replica): it was created.
			setCondition(&st, gen, ss1.ConditionSecretCreated, metav1.ConditionTrue, ss1.ReasonCreateSuccessful, ss1.MessageCreateSuccessful)
		}
		setCondition(&st, gen, ss1.ConditionSecretUpdated, metav1.ConditionTrue, ss1.ReasonSecretUpToDate, ss1.MessageSecretUpToDate)
	}
	keepGenerations(&st, gen)
	setCondition(&st, gen, ss1.ConditionReady, metav1.ConditionTrue, ss1.ReasonSecretUpToDate, ss1.MessageSecretUpToDate)
	st.ObservedGeneration = gen
	st.SyncHash = hash
	st.Objects = objects
	st.HandledRefresh = handled
	return st
}

// failureStatus is the status after a failed sync: the failing condition
// and Ready False; the hash and objects of the last success stay, as the
// Secret does.
func failureStatus(old ss1.SecretSyncStatus, gen int64, f *failure, handled string) ss1.SecretSyncStatus {
	st := *old.DeepCopy()
	initConditions(&st, gen)
	setCondition(&st, gen, f.condition, metav1.ConditionFalse, f.reason, f.message)
	keepGenerations(&st, gen)
	setCondition(&st, gen, ss1.ConditionReady, metav1.ConditionFalse, f.reason, f.message)
	st.ObservedGeneration = gen
	st.HandledRefresh = handled
	return st
}

// keepGenerations moves every condition to generation gen: they describe
// it (a condition a sync did not touch is still true of the new spec).
func keepGenerations(st *ss1.SecretSyncStatus, gen int64) {
	for i := range st.Conditions {
		st.Conditions[i].ObservedGeneration = gen
	}
}

// statusEqual reports whether two statuses say the same, transition times
// and lastSuccessfulSyncTime aside.
func statusEqual(a, b ss1.SecretSyncStatus) bool {
	a.LastSuccessfulSyncTime, b.LastSuccessfulSyncTime = nil, nil
	return equality.Semantic.DeepEqual(a, b)
}
