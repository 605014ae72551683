package secretsync

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/rotation"
)

// synced returns a SecretSync of generation 2 whose status says it was
// synced for that generation, with annotations ann.
func syncedSS(ann map[string]string) *ss1.SecretSync {
	ss := &ss1.SecretSync{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n", UID: "u1", Generation: 2, Annotations: ann}}
	ss.Status = successStatus(ss.Status, 2, "hash", nil, "", true)
	return ss
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	r := &Reconciler{cfg: Config{PollInterval: time.Hour, Backoff: rotation.Backoff{Initial: 10 * time.Second, Max: time.Minute}}}
	fresh := refreshState{lastRefresh: now.Add(-time.Minute)}
	failing := refreshState{lastRefresh: now.Add(-time.Minute), failures: 2, lastFailure: now.Add(-5 * time.Second), failedGeneration: 2}
	tests := []struct {
		name     string
		ss       *ss1.SecretSync
		st       refreshState
		upToDate bool
		want     plan
	}{
		{"up to date, not due", syncedSS(nil), fresh, true, plan{after: 59 * time.Minute}},
		{"interval passed", syncedSS(nil), refreshState{lastRefresh: now.Add(-2 * time.Hour)}, true, plan{why: whyDue}},
		{"new generation", func() *ss1.SecretSync { s := syncedSS(nil); s.Generation = 3; return s }(), fresh, true, plan{why: whyGeneration}},
		{"failed generation backs off", func() *ss1.SecretSync {
			s := syncedSS(nil)
			s.Status.ObservedGeneration = 1
			return s
		}(), failing, false, plan{after: 15 * time.Second}},
		{"drift", syncedSS(nil), fresh, false, plan{why: whyDrift}},
		{"drift while backing off", syncedSS(nil), failing, false, plan{after: 15 * time.Second}},
		{"refresh trigger", syncedSS(map[string]string{rotation.RefreshAnnotation: "1"}), fresh, true, plan{why: whyTriggered}},
		{"trigger already handled", func() *ss1.SecretSync {
			s := syncedSS(map[string]string{rotation.RefreshAnnotation: "1"})
			s.Status.HandledRefresh = "1"
			return s
		}(), fresh, true, plan{after: 59 * time.Minute}},
		{"OnDemand never due", syncedSS(map[string]string{rotation.PolicyAnnotation: "OnDemand"}), refreshState{lastRefresh: now.Add(-48 * time.Hour)}, true, plan{}},
		{"CreatedOnce ignores triggers", syncedSS(map[string]string{rotation.PolicyAnnotation: "CreatedOnce", rotation.RefreshAnnotation: "2"}), fresh, true, plan{}},
		{"own interval", syncedSS(map[string]string{rotation.IntervalAnnotation: "30s"}), fresh, true, plan{why: whyDue}},
		{"failed refresh retried after its backoff", syncedSS(nil), refreshState{lastRefresh: now.Add(-time.Minute), failures: 1, lastFailure: now.Add(-11 * time.Second)}, true, plan{why: whyDue}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, errs := r.policyFor(tt.ss, nil)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if got := r.decide(tt.ss, p, tt.st, tt.upToDate, now); got != tt.want {
				t.Errorf("decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestPolicyFor: the SecretSync's annotations override its class's; the
// poll interval is the default; no periodic refresh with interval 0.
func TestPolicyFor(t *testing.T) {
	class := &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		rotation.IntervalAnnotation: "5m", rotation.JitterAnnotation: "1m",
	}}}
	r := &Reconciler{cfg: Config{PollInterval: time.Hour}}
	p, _ := r.policyFor(syncedSS(map[string]string{rotation.IntervalAnnotation: "2m"}), class)
	if p.Kind != rotation.Periodic || p.Interval != 2*time.Minute || p.Jitter != time.Minute {
		t.Errorf("policy %+v, want Periodic every 2m (SecretSync) with 1m jitter (class)", p)
	}
	p, _ = r.policyFor(syncedSS(nil), nil)
	if p.Kind != rotation.Periodic || p.Interval != time.Hour {
		t.Errorf("policy %+v, want Periodic every hour (--rotation-poll-interval)", p)
	}
	r.cfg.PollInterval = 0
	if p, _ = r.policyFor(syncedSS(nil), nil); p.Kind != rotation.OnDemand {
		t.Errorf("policy %+v with --rotation-poll-interval=0, want OnDemand", p)
	}
	if p, _ = r.policyFor(syncedSS(map[string]string{rotation.PolicyAnnotation: "Periodic", rotation.IntervalAnnotation: "0s"}), nil); p.Kind != rotation.OnDemand {
		t.Errorf("policy %+v for a zero interval, want OnDemand (never a refresh loop)", p)
	}
	if _, errs := r.policyFor(syncedSS(map[string]string{rotation.PolicyAnnotation: "Sometimes"}), nil); len(errs) != 1 {
		t.Errorf("an invalid policy gave %d errors, want 1", len(errs))
	}
}
