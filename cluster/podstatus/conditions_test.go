package podstatus_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster/podstatus"
)

func wantCondition(t *testing.T, st *secretsstorev1.SecretProviderClassPodStatus, typ string,
	status metav1.ConditionStatus, reason, message string, transition time.Time,
) {
	t.Helper()
	c := condition(t, st, typ)
	if c.Status != status || c.Reason != reason || c.Message != message || !c.LastTransitionTime.Time.Equal(transition) {
		t.Errorf("%s condition = {%s %s %q %s}, want {%s %s %q %s}", typ,
			c.Status, c.Reason, c.Message, c.LastTransitionTime.UTC(), status, reason, message, transition)
	}
}

func TestPublishRefreshFailureAndRecovery(t *testing.T) {
	f := newFixture(t)
	first := outcome(t0)
	f.publishCounting(t, first, nil, 1)

	// A refresh fails: the old files stay mounted, the status says so at once.
	t1 := t0.Add(3 * time.Minute)
	f.clk.SetTime(t1.Add(200 * time.Millisecond))
	failed := republish(first, t0) // the last successful refresh is still t0
	failed.Err = errors.New(`provider "aws": rpc error: code = Unavailable desc = connection refused`)
	f.publishCounting(t, failed, nil, 1)
	st := f.get(t)
	wantCondition(t, st, secretsstorev1.ConditionMounted, metav1.ConditionTrue, "Mounted", "", t0)
	wantCondition(t, st, secretsstorev1.ConditionCurrent, metav1.ConditionFalse, "RefreshFailed", failed.Err.Error(), t1)
	if !st.Status.Mounted || len(st.Status.Objects) != 2 {
		t.Errorf("status after a failed refresh = mounted %t, %d objects; want mounted with the old 2 objects",
			st.Status.Mounted, len(st.Status.Objects))
	}
	if got := st.Status.LastRefreshTime; got == nil || !got.Time.Equal(t0) {
		t.Errorf("lastRefreshTime = %v, want the last success %v", got, t0)
	}

	// The same failure on the next republish writes nothing.
	f.clk.SetTime(t1.Add(time.Minute))
	f.publishCounting(t, failed, nil, 0)

	// Recovery: Current turns True with a new transition time.
	t2 := t1.Add(2 * time.Minute)
	f.clk.SetTime(t2)
	f.publishCounting(t, republish(first, t2), nil, 1)
	st = f.get(t)
	wantCondition(t, st, secretsstorev1.ConditionMounted, metav1.ConditionTrue, "Mounted", "", t0)
	wantCondition(t, st, secretsstorev1.ConditionCurrent, metav1.ConditionTrue, "Refreshed", "", t2)
	if got := st.Status.LastRefreshTime; got == nil || !got.Time.Equal(t2) {
		t.Errorf("lastRefreshTime = %v, want %v", got, t2)
	}
}

func TestPublishTruncatesErrorMessage(t *testing.T) {
	f := newFixture(t)
	first := outcome(t0)
	f.publishCounting(t, first, nil, 1)

	// "é" is two bytes: after the odd-length prefix, byte 1024 falls inside one.
	long := "x: " + strings.Repeat("é", 1000)
	failed := republish(first, t0)
	failed.Err = errors.New(long)
	f.publishCounting(t, failed, nil, 1)

	msg := condition(t, f.get(t), secretsstorev1.ConditionCurrent).Message
	if len(msg) > podstatus.MaxMessageBytes || len(msg) < podstatus.MaxMessageBytes-3 {
		t.Errorf("message is %d bytes, want at most %d and not much less", len(msg), podstatus.MaxMessageBytes)
	}
	if !utf8.ValidString(msg) || !strings.HasPrefix(long, msg) {
		t.Errorf("message is not a valid UTF-8 prefix of the error: %q", msg)
	}
}

func TestPublishSyncedCondition(t *testing.T) {
	f := newFixture(t)
	first := outcome(t0)
	synced := &metav1.Condition{Status: metav1.ConditionTrue, Reason: "Synced", Message: "1 secret"}
	f.publishCounting(t, first, synced, 1)
	st := f.get(t)
	wantCondition(t, st, secretsstorev1.ConditionSecretsSynced, metav1.ConditionTrue, "Synced", "1 secret", t0)
	if c := condition(t, st, secretsstorev1.ConditionSecretsSynced); c.ObservedGeneration != 3 {
		t.Errorf("SecretsSynced observedGeneration = %d, want the class generation 3", c.ObservedGeneration)
	}

	steps := []struct {
		name       string
		synced     *metav1.Condition
		wantWrites int
		want       *metav1.Condition // nil: no SecretsSynced condition
	}{
		{name: "same again", synced: synced, wantWrites: 0, want: synced},
		{
			name:       "sync fails",
			synced:     &metav1.Condition{Type: secretsstorev1.ConditionSecretsSynced, Status: metav1.ConditionFalse, Reason: "SyncFailed", Message: "forbidden"},
			wantWrites: 1,
			want:       &metav1.Condition{Status: metav1.ConditionFalse, Reason: "SyncFailed", Message: "forbidden"},
		},
		{name: "class stops syncing", synced: nil, wantWrites: 1},
		{name: "still nothing to sync", synced: nil, wantWrites: 0},
	}
	for i, step := range steps {
		now := t0.Add(time.Duration(i+1) * time.Minute)
		f.clk.SetTime(now)
		f.publishCounting(t, republish(first, now), step.synced, step.wantWrites)
		st := f.get(t)
		if step.want == nil {
			if hasCondition(st, secretsstorev1.ConditionSecretsSynced) {
				t.Errorf("%s: SecretsSynced condition still present: %+v", step.name, st.Status.Conditions)
			}
			continue
		}
		transition := t0
		if step.wantWrites > 0 {
			transition = now
		}
		wantCondition(t, st, secretsstorev1.ConditionSecretsSynced, step.want.Status, step.want.Reason, step.want.Message, transition)
	}
	// Mounted and Current never moved.
	st = f.get(t)
	wantCondition(t, st, secretsstorev1.ConditionMounted, metav1.ConditionTrue, "Mounted", "", t0)
	wantCondition(t, st, secretsstorev1.ConditionCurrent, metav1.ConditionTrue, "Refreshed", "", t0)
}

func TestPublishRejectsInvalidSyncedCondition(t *testing.T) {
	for name, c := range map[string]*metav1.Condition{
		"other type":   {Type: "Ready", Status: metav1.ConditionTrue, Reason: "Synced"},
		"no status":    {Reason: "Synced"},
		"bad status":   {Status: "Yes", Reason: "Synced"},
		"empty reason": {Status: metav1.ConditionTrue},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			err := f.w.Publish(t.Context(), outcome(t0), c)
			if !errors.Is(err, podstatus.ErrInvalidCondition) {
				t.Errorf("Publish = %v, want ErrInvalidCondition", err)
			}
			if n := f.writes.total(); n != 0 {
				t.Errorf("%d write requests, want 0", n)
			}
		})
	}
}

// TestPolicyProblemsAndHandledTriggers: an invalid rotation annotation is a
// False RotationPolicyValid naming it, removed once the class is fixed; the
// trigger values the volume acted on are in status.handledRefresh, and a
// new one is written even when nothing else changed.
func TestPolicyProblemsAndHandledTriggers(t *testing.T) {
	f := newFixture(t)
	first := outcome(t0)
	first.PolicyProblems = []string{`annotation keymount.io/rotation-interval: "soon" is not a duration`}
	first.Handled.Class = "2026-11-23T10:00:00Z"
	f.publishCounting(t, first, nil, 1)
	st := f.get(t)
	wantCondition(t, st, secretsstorev1.ConditionRotationPolicy, metav1.ConditionFalse, podstatus.ReasonInvalidAnnotation,
		first.PolicyProblems[0], t0)
	if h := st.Status.HandledRefresh; h == nil || h.Class != first.Handled.Class || h.Pod != "" {
		t.Errorf("handledRefresh = %+v, want class %q", h, first.Handled.Class)
	}

	next := republish(first, t0)
	next.PolicyProblems = nil
	next.Handled.Pod = "p1"
	f.publishCounting(t, next, nil, 1)
	st = f.get(t)
	if hasCondition(st, secretsstorev1.ConditionRotationPolicy) {
		t.Errorf("RotationPolicyValid kept after the class was fixed: %+v", st.Status.Conditions)
	}
	if h := st.Status.HandledRefresh; h == nil || h.Class != first.Handled.Class || h.Pod != "p1" {
		t.Errorf("handledRefresh = %+v, want class %q and pod p1", h, first.Handled.Class)
	}
	f.publishCounting(t, next, nil, 0)
}

// TestPublishContentChanged: the change report keymount-controller restarts
// workloads from. A first publish has no ContentChanged; a refresh that
// finds nothing new writes nothing; a failed one sets none; a refresh that
// changed the objects sets it True in the same write as the new versions;
// a later change keeps its first transition time and costs no more writes
// than the versions do.
func TestPublishContentChanged(t *testing.T) {
	f := newFixture(t)
	first := outcome(t0)
	f.publishCounting(t, first, nil, 1)
	has := func(st *secretsstorev1.SecretProviderClassPodStatus) bool {
		for _, c := range st.Status.Conditions {
			if c.Type == secretsstorev1.ConditionContentChanged {
				return true
			}
		}
		return false
	}
	if has(f.get(t)) {
		t.Fatalf("a first publish reports a change: %+v", f.get(t).Status.Conditions)
	}
	f.publishCounting(t, republish(first, t0), nil, 0)
	failed := republish(first, t0)
	failed.Err, failed.Changed = errors.New("store down"), true
	f.publishCounting(t, failed, nil, 1)
	if has(f.get(t)) {
		t.Errorf("a failed refresh reports a change")
	}

	t1 := t0.Add(2 * time.Minute)
	f.clk.SetTime(t1)
	changed := republish(first, t1)
	changed.Changed = true
	changed.Objects[0].Version = "v8"
	f.publishCounting(t, changed, nil, 1)
	st := f.get(t)
	wantCondition(t, st, secretsstorev1.ConditionContentChanged, metav1.ConditionTrue, podstatus.ReasonObjectsChanged,
		condition(t, st, secretsstorev1.ConditionContentChanged).Message, t1)
	if st.Status.Objects[0].Version != "v8" && st.Status.Objects[1].Version != "v8" {
		t.Errorf("objects %+v, want the new version", st.Status.Objects)
	}

	t2 := t1.Add(2 * time.Minute)
	f.clk.SetTime(t2)
	again := republish(changed, t2)
	again.Changed = true
	again.Objects[0].Version = "v9"
	f.publishCounting(t, again, nil, 1)
	wantCondition(t, f.get(t), secretsstorev1.ConditionContentChanged, metav1.ConditionTrue, podstatus.ReasonObjectsChanged,
		condition(t, st, secretsstorev1.ConditionContentChanged).Message, t1)
	f.publishCounting(t, republish(again, t2), nil, 0)
}
