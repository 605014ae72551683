package secretsync

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

func condition(st ss1.SecretSyncStatus, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// TestStatusTransitions: create → v0.0.5's conditions and Ready; a failure
// after it sets SecretUpdated and Ready False and keeps the hash; a
// refresh that finds nothing new leaves the status equal.
func TestStatusTransitions(t *testing.T) {
	objs := []ss1.SecretSyncObject{{ID: "a", Version: "1"}}
	created := successStatus(ss1.SecretSyncStatus{}, 1, "h1", objs, "", true)
	for typ, want := range map[string]string{
		ss1.ConditionSecretCreated: ss1.ReasonCreateSuccessful,
		ss1.ConditionSecretUpdated: ss1.ReasonNoUpdatesAttemptedYet,
		ss1.ConditionReady:         ss1.ReasonSecretUpToDate,
	} {
		if c := condition(created, typ); c.Reason != want || c.ObservedGeneration != 1 {
			t.Errorf("after create, %s = %s (generation %d), want %s for generation 1", typ, c.Reason, c.ObservedGeneration, want)
		}
	}
	if created.ObservedGeneration != 1 || created.SyncHash != "h1" || len(created.Objects) != 1 {
		t.Errorf("after create: %+v", created)
	}
	f := newFailure(true, ss1.ReasonProviderError, ResultProvider, ss1.MessageFormatFetchFailed, "boom")
	failed := failureStatus(created, 2, f, "t1")
	if c := condition(failed, ss1.ConditionSecretUpdated); c.Status != metav1.ConditionFalse || c.Reason != ss1.ReasonProviderError {
		t.Errorf("after a failure SecretUpdated = %+v", c)
	}
	if c := condition(failed, ss1.ConditionReady); c.Status != metav1.ConditionFalse || c.ObservedGeneration != 2 ||
		c.Message != "fetching secrets from the provider failed: boom" {
		t.Errorf("after a failure Ready = %+v", c)
	}
	if c := condition(failed, ss1.ConditionSecretCreated); c.Status != metav1.ConditionTrue {
		t.Errorf("a failed update touched SecretCreated: %+v", c)
	}
	if failed.SyncHash != "h1" || failed.HandledRefresh != "t1" {
		t.Errorf("after a failure hash %q handled %q, want the last success's hash and the trigger", failed.SyncHash, failed.HandledRefresh)
	}
	updated := successStatus(failed, 2, "h1", objs, "t1", false)
	if again := successStatus(updated, 2, "h1", objs, "t1", false); !statusEqual(updated, again) {
		t.Errorf("a refresh that changed nothing changed the status")
	}
	if !readyTrue(updated) {
		t.Errorf("Ready not True after a successful refresh")
	}
}
