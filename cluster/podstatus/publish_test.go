package podstatus_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster/podstatus"
	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/volume"
)

func TestName(t *testing.T) {
	if got, want := podstatus.Name("web-0", "team-a", "db-creds"), "web-0-team-a-db-creds"; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
}

func TestPublishCreates(t *testing.T) {
	f := newFixture(t)
	f.clk.SetTime(t0.Add(700 * time.Millisecond))
	f.publishCounting(t, outcome(t0), nil, 1)

	got := f.get(t)
	at := metav1.NewTime(t0)
	want := &secretsstorev1.SecretProviderClassPodStatus{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testNS, Name: "web-0-team-a-db-creds",
			Labels: map[string]string{secretsstorev1.InternalNodeLabel: testNode},
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "Pod", Name: testPod, UID: types.UID(testUID)},
			},
		},
		Status: secretsstorev1.SecretProviderClassPodStatusStatus{
			PodName: testPod, SecretProviderClassName: testClass, Mounted: true, TargetPath: testPath,
			Objects: []secretsstorev1.SecretProviderClassObject{
				{ID: "secretsmanager/api", Version: "v2"},
				{ID: "secretsmanager/db", Version: "v7"},
			},
			Conditions: []metav1.Condition{
				{Type: "Mounted", Status: metav1.ConditionTrue, Reason: "Mounted", ObservedGeneration: 3, LastTransitionTime: at},
				{Type: "Current", Status: metav1.ConditionTrue, Reason: "Refreshed", ObservedGeneration: 3, LastTransitionTime: at},
			},
			LastRefreshTime:    &at,
			ObservedGeneration: 3,
		},
	}
	ignore := cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ResourceVersion", "CreationTimestamp", "Generation", "UID")
	if d := cmp.Diff(want, got, ignore, cmpopts.IgnoreTypes(metav1.TypeMeta{})); d != "" {
		t.Errorf("pod status (-want +got):\n%s", d)
	}
}

func TestPublishWithoutPodUIDHasNoOwner(t *testing.T) {
	f := newFixture(t)
	o := outcome(t0)
	o.PodUID = ""
	f.publishCounting(t, o, nil, 1)
	if refs := f.get(t).OwnerReferences; len(refs) != 0 {
		t.Errorf("owner references = %+v, want none", refs)
	}
}

func TestPublishKeepsOtherMetadata(t *testing.T) {
	other := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Thing", Name: "t", UID: "thing-uid"}
	existing := &secretsstorev1.SecretProviderClassPodStatus{ObjectMeta: metav1.ObjectMeta{
		Namespace: testNS, Name: podstatus.Name(testPod, testNS, testClass),
		Labels:      map[string]string{"team": "a"},
		Annotations: map[string]string{"note": "kept"},
		OwnerReferences: []metav1.OwnerReference{
			// The pod was recreated with the same name: its old UID goes.
			{APIVersion: "v1", Kind: "Pod", Name: testPod, UID: "old-pod-uid"},
			other,
		},
	}}
	f := newFixture(t, existing)
	f.publishCounting(t, outcome(t0), nil, 1)

	got := f.get(t)
	wantLabels := map[string]string{"team": "a", secretsstorev1.InternalNodeLabel: testNode}
	if d := cmp.Diff(wantLabels, got.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	wantRefs := []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "Pod", Name: testPod, UID: types.UID(testUID)},
		other,
	}
	if d := cmp.Diff(wantRefs, got.OwnerReferences); d != "" {
		t.Errorf("owner references (-want +got):\n%s", d)
	}
	if got.Annotations["note"] != "kept" {
		t.Errorf("annotations = %v, want note=kept", got.Annotations)
	}
}

func TestPublishFailedFirstPublishCreatesNothing(t *testing.T) {
	for name, mutate := range map[string]func(o *driver.Outcome){
		"first publish failed":          func(o *driver.Outcome) { o.Err = errors.New("provider unavailable") },
		"first publish without a class": func(o *driver.Outcome) { o.Err = errors.New("class not found"); o.Class = nil },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			o := outcome(t0)
			mutate(o)
			f.publishCounting(t, o, nil, 0)
			err := f.c.Get(t.Context(), client.ObjectKey{Namespace: testNS, Name: podstatus.Name(testPod, testNS, testClass)},
				&secretsstorev1.SecretProviderClassPodStatus{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("Get after Publish = %v, want NotFound", err)
			}
		})
	}
}

// TestPublishRefreshWithoutClass: a refresh that failed because the class is
// gone is recorded under the class name from the request.
func TestPublishRefreshWithoutClass(t *testing.T) {
	f := newFixture(t)
	f.publish(t, outcome(t0), nil)
	o := republish(outcome(t0), t0)
	o.Class = nil
	o.Err = errors.New("class not found")
	f.publishCounting(t, o, nil, 1)
	if c := condition(t, f.get(t), secretsstorev1.ConditionCurrent); c.Status != metav1.ConditionFalse || c.Reason != podstatus.ReasonRefreshFailed {
		t.Fatalf("Current = %+v, want False/RefreshFailed", c)
	}
}

func TestPublishUnchangedMakesNoWrite(t *testing.T) {
	f := newFixture(t)
	first := outcome(t0)
	f.publishCounting(t, first, nil, 1)
	before := f.get(t)

	// Kubelet republishes every minute; the provider answers the same.
	for i := 1; i <= 9; i++ {
		now := t0.Add(time.Duration(i) * time.Minute)
		f.clk.SetTime(now)
		f.publishCounting(t, republish(first, now), nil, 0)
	}
	if after := f.get(t); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("resourceVersion %s → %s, want unchanged", before.ResourceVersion, after.ResourceVersion)
	}
}

func TestPublishLastRefreshTimeGranularity(t *testing.T) {
	tests := []struct {
		name        string
		granularity time.Duration // 0: the default
		after       time.Duration
		wantWrite   bool
	}{
		{name: "default: never alone", after: 10*time.Minute + time.Second},
		{name: "default: not after a day either", after: 24 * time.Hour},
		{name: "custom, within", granularity: time.Minute, after: time.Minute},
		{name: "custom, beyond", granularity: time.Minute, after: 61 * time.Second, wantWrite: true},
		{name: "zero: every refresh", granularity: -1, after: time.Second, wantWrite: true},
		{name: "zero: same second", granularity: -1, after: 0},
		{name: "older refresh", after: -time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			switch {
			case tc.granularity > 0:
				f.w.RefreshTimeGranularity = tc.granularity
			case tc.granularity < 0:
				f.w.RefreshTimeGranularity = 0
			}
			first := outcome(t0)
			f.publishCounting(t, first, nil, 1)

			refreshed := t0.Add(tc.after)
			f.clk.SetTime(refreshed)
			want, wantWrites := t0, 0
			if tc.wantWrite {
				want, wantWrites = refreshed, 1
			}
			f.publishCounting(t, republish(first, refreshed), nil, wantWrites)
			if got := f.get(t).Status.LastRefreshTime; got == nil || !got.Time.Equal(want) {
				t.Errorf("lastRefreshTime = %v, want %v", got, want)
			}
		})
	}
}

func TestPublishChangesWriteOnce(t *testing.T) {
	tests := []struct {
		name   string
		change func(o *driver.Outcome)
		check  func(t *testing.T, st *secretsstorev1.SecretProviderClassPodStatus)
	}{{
		name: "object version",
		change: func(o *driver.Outcome) {
			o.Objects = []volume.Object{{ID: "secretsmanager/db", Version: "v8"}, {ID: "secretsmanager/api", Version: "v2"}}
			o.Changed = true
		},
		check: func(t *testing.T, st *secretsstorev1.SecretProviderClassPodStatus) {
			want := []secretsstorev1.SecretProviderClassObject{
				{ID: "secretsmanager/api", Version: "v2"}, {ID: "secretsmanager/db", Version: "v8"},
			}
			if d := cmp.Diff(want, st.Status.Objects); d != "" {
				t.Errorf("objects (-want +got):\n%s", d)
			}
		},
	}, {
		name:   "object removed",
		change: func(o *driver.Outcome) { o.Objects = o.Objects[:1] },
		check: func(t *testing.T, st *secretsstorev1.SecretProviderClassPodStatus) {
			if len(st.Status.Objects) != 1 || st.Status.Objects[0].ID != "secretsmanager/db" {
				t.Errorf("objects = %+v, want only secretsmanager/db", st.Status.Objects)
			}
		},
	}, {
		name:   "class generation",
		change: func(o *driver.Outcome) { o.Class.Generation = 4 },
		check: func(t *testing.T, st *secretsstorev1.SecretProviderClassPodStatus) {
			if st.Status.ObservedGeneration != 4 {
				t.Errorf("observedGeneration = %d, want 4", st.Status.ObservedGeneration)
			}
			for _, typ := range []string{secretsstorev1.ConditionMounted, secretsstorev1.ConditionCurrent} {
				c := condition(t, st, typ)
				if c.ObservedGeneration != 4 || !c.LastTransitionTime.Time.Equal(t0) {
					t.Errorf("%s condition = %+v, want observedGeneration 4 and the first transition time", typ, c)
				}
			}
		},
	}, {
		name:   "pod recreated",
		change: func(o *driver.Outcome) { o.PodUID = "new-pod-uid" },
		check: func(t *testing.T, st *secretsstorev1.SecretProviderClassPodStatus) {
			want := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: testPod, UID: "new-pod-uid"}}
			if d := cmp.Diff(want, st.OwnerReferences); d != "" {
				t.Errorf("owner references (-want +got):\n%s", d)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			first := outcome(t0)
			f.publishCounting(t, first, nil, 1)

			now := t0.Add(time.Minute)
			f.clk.SetTime(now)
			o := republish(first, now)
			tc.change(o)
			f.publishCounting(t, o, nil, 1)
			st := f.get(t)
			tc.check(t, st)
			// Written with another change, lastRefreshTime is exact.
			if got := st.Status.LastRefreshTime; got == nil || !got.Time.Equal(now) {
				t.Errorf("lastRefreshTime = %v, want %v", got, now)
			}
			// And the same outcome again writes nothing.
			f.publishCounting(t, o, nil, 0)
		})
	}
}
