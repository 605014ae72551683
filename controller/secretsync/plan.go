package secretsync

import (
	"maps"
	"time"

	secretsyncv1alpha1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/rotation"
)

// Why a sync happens, as the sync counter's trigger label says.
const (
	whyGeneration = "generation" // a new SecretSync, or a new spec
	whyDrift      = "drift"      // the Secret, the class or forceSynchronization changed
	whyTriggered  = "triggered"  // a new keymount.io/refresh value
	whyDue        = "due"        // the Periodic interval passed, or a retry
)

// plan is what a reconcile does: sync now (why != ""), or come back after.
type plan struct {
	why   string
	after time.Duration
}

// policyFor is the refresh policy of ss: the rotation annotations of its
// class, overridden by its own. Invalid values are reported and left out.
func (r *Reconciler) policyFor(ss *secretsyncv1alpha1.SecretSync, class *secretsstorev1.SecretProviderClass) (rotation.Policy, []error) {
	ann := map[string]string{}
	if class != nil {
		maps.Copy(ann, class.Annotations)
	}
	maps.Copy(ann, ss.Annotations)
	delete(ann, rotation.RefreshAnnotation) // the class's trigger is for volumes
	p, errs := rotation.ForClass(ann, r.cfg.policyDefaults())
	if p.Kind == rotation.Periodic && p.Interval <= 0 {
		// A zero interval would refresh in a loop: only triggers refresh.
		p.Kind = rotation.OnDemand
	}
	return p, errs
}

// decide returns what to do with ss now. upToDate says the Secret matches
// status.syncHash for the current class and spec.
func (r *Reconciler) decide(ss *secretsyncv1alpha1.SecretSync, p rotation.Policy, st refreshState, upToDate bool, now time.Time) plan {
	left := r.cfg.Backoff.Left(st.failures, st.lastFailure, now) // of the last failure's backoff
	backingOff := left > 0
	switch {
	case ss.Status.ObservedGeneration != ss.Generation || ss.Status.SyncHash == "":
		// A spec the last failure did not see is tried at once.
		if backingOff && st.failedGeneration == ss.Generation {
			return plan{after: left}
		}
		return plan{why: whyGeneration}
	case !upToDate:
		if backingOff {
			return plan{after: left}
		}
		return plan{why: whyDrift}
	}
	rs := rotation.State{
		VolumeID:    string(ss.UID),
		LastRefresh: st.lastRefresh,
		Failures:    st.failures,
		LastFailure: st.lastFailure,
		Handled:     rotation.Triggers{Class: ss.Status.HandledRefresh},
		CutBackoff:  st.cutBackoff,
	}
	trigger := rotation.Triggers{Class: ss.Annotations[rotation.RefreshAnnotation]}
	switch p.Decide(rs, trigger, now, r.cfg.Backoff) {
	case rotation.DecisionTriggered:
		return plan{why: whyTriggered}
	case rotation.DecisionDue:
		return plan{why: whyDue}
	case rotation.DecisionBackoff:
		return plan{after: left}
	case rotation.DecisionNotDue:
		return plan{after: st.lastRefresh.Add(p.Wait(string(ss.UID))).Sub(now)}
	default: // skipped by policy: only a change of the SecretSync wakes it
		return plan{}
	}
}

// afterSuccess is when a Periodic SecretSync is next due; 0 for none.
func afterSuccess(ss *secretsyncv1alpha1.SecretSync, p rotation.Policy) time.Duration {
	if p.Kind != rotation.Periodic {
		return 0
	}
	return p.Wait(string(ss.UID))
}
