package conformance_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/harness"
)

// switchPolicy is a refresh policy a test turns on and off, and that
// counts what it was asked.
type switchPolicy struct {
	due   atomic.Bool
	asked atomic.Int32
	last  atomic.Int64 // the lastRefresh it was last asked about, unix ns
}

func (p *switchPolicy) Decide(s rotation.State, _, _, _ string, _ time.Time) rotation.Decision {
	p.asked.Add(1)
	p.last.Store(s.LastRefresh.UnixNano())
	if p.due.Load() {
		return rotation.Decision{Verdict: rotation.DecisionDue}
	}
	return rotation.Decision{Verdict: rotation.DecisionNotDue}
}

func (p *switchPolicy) Current(_, _, _ string) (rotation.Triggers, []error) {
	return rotation.Triggers{}, nil
}

// TestRepublishNotDue: a republish the refresh policy says is not due keeps
// what is mounted (no provider call: the record's last provider answer stays,
// and a store change does not reach the volume), still answers OK, and puts
// back a target someone unmounted; once the policy says due, the change
// arrives. The policy is asked with the time of the provider's last answer.
func TestRepublishNotDue(t *testing.T) {
	policy := &switchPolicy{}
	h := harness.Start(t, harness.Options{Refresh: policy})
	h.WriteClass(appClass, appObjects)
	writeApp(h, "v1")
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)
	if n := policy.asked.Load(); n != 0 {
		t.Errorf("the policy was asked %d times about a first publish, want never", n)
	}
	rec1 := mustRecord(t, h, v)

	writeApp(h, "v2")
	for range 3 {
		publish(t, h, v, appClass)
	}
	assertFiles(t, v.Target, appFiles("v1"))
	assertPublished(t, h, v)
	if rec := mustRecord(t, h, v); !rec.LastMount.Equal(rec1.LastMount) || rec.Generation != 1 {
		t.Errorf("record lastMount %v generation %d after republishes not due, want %v and 1 (no provider call)", rec.LastMount, rec.Generation, rec1.LastMount)
	}
	if got := time.Unix(0, policy.last.Load()); !got.Equal(rec1.LastMount) {
		t.Errorf("the policy was asked about lastRefresh %v, want the record's last provider answer %v", got, rec1.LastMount)
	}

	// Someone unmounts the target: a republish that is not due binds it again.
	mustUnmount(t, v.Target)
	publish(t, h, v, appClass)
	assertPublished(t, h, v)
	assertFiles(t, v.Target, appFiles("v1"))

	policy.due.Store(true)
	publish(t, h, v, appClass)
	assertFiles(t, v.Target, appFiles("v2"))
	if rec := mustRecord(t, h, v); rec.Generation != 2 {
		t.Errorf("record generation %d after a due republish, want 2", rec.Generation)
	}
}
