package rotation

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"
)

// DefaultInterval is upstream's --rotation-poll-interval default.
const DefaultInterval = 2 * time.Minute

// Kind is when a class's volumes are refreshed.
type Kind string

// Policies of PolicyAnnotation.
const (
	// Periodic refreshes once the interval (plus the volume's share of the
	// jitter) has passed since the provider last answered, and on a
	// trigger.
	Periodic Kind = "Periodic"
	// CreatedOnce never refreshes a mounted volume, not even on a trigger:
	// values change only when a new pod mounts them.
	CreatedOnce Kind = "CreatedOnce"
	// OnDemand refreshes only on a trigger (RefreshAnnotation).
	OnDemand Kind = "OnDemand"
)

// Decisions about a mounted volume, as metrics count them.
const (
	DecisionNotDue          = "not_due"
	DecisionDue             = "due"
	DecisionTriggered       = "triggered"
	DecisionSkippedByPolicy = "skipped_by_policy"
	DecisionBackoff         = "backoff"
)

// NodeDefaults is the node's refresh policy, from upstream's switches:
// with rotation off (upstream's default) a mounted volume is refreshed
// only on a trigger; with it on, once Interval has passed since the
// provider last answered (0: on every republish).
type NodeDefaults struct {
	Enabled  bool
	Interval time.Duration
}

// Policy returns the policy of a class without keymount's annotations.
func (n NodeDefaults) Policy() Policy {
	if n.Enabled {
		return Policy{Kind: Periodic, Interval: n.Interval}
	}
	return Policy{Kind: OnDemand, Interval: n.Interval}
}

// Policy is how one class's volumes are refreshed.
type Policy struct {
	Kind     Kind
	Interval time.Duration
	// Jitter spreads Periodic refreshes: a volume waits Interval plus a
	// share of Jitter fixed by its volume ID.
	Jitter time.Duration
}

// ForClass returns the policy a class's annotations set on top of the
// node's defaults. An annotation whose value is invalid is left out (its
// node default applies) and reported as an error naming it and the fix.
// An interval without a policy turns Periodic on.
func ForClass(annotations map[string]string, node NodeDefaults) (Policy, []error) {
	p := node.Policy()
	var errs []error
	kind, hasKind := annotations[PolicyAnnotation]
	if hasKind {
		switch k := Kind(strings.TrimSpace(kind)); {
		case strings.EqualFold(string(k), string(Periodic)):
			p.Kind = Periodic
		case strings.EqualFold(string(k), string(CreatedOnce)):
			p.Kind = CreatedOnce
		case strings.EqualFold(string(k), string(OnDemand)):
			p.Kind = OnDemand
		default:
			hasKind = false
			errs = append(errs, fmt.Errorf("annotation %s: %q is not a policy: use Periodic, CreatedOnce or OnDemand; "+
				"the node's default (%s) applies", PolicyAnnotation, kind, p.Kind))
		}
	}
	if d, ok := durationAnnotation(annotations, IntervalAnnotation, "the node's --rotation-poll-interval applies", &errs); ok {
		p.Interval = d
		if !hasKind {
			p.Kind = Periodic
		}
	}
	if d, ok := durationAnnotation(annotations, JitterAnnotation, "no jitter applies", &errs); ok {
		p.Jitter = d
	}
	return p, errs
}

// durationAnnotation returns the duration of annotation, and whether it is
// set and valid. An invalid value is added to errs, naming fallback.
func durationAnnotation(annotations map[string]string, annotation, fallback string, errs *[]error) (time.Duration, bool) {
	v, ok := annotations[annotation]
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < 0 {
		*errs = append(*errs, fmt.Errorf("annotation %s: %q is not a duration of 0 or more: use a Go duration such as 10m or 1h30m; %s",
			annotation, v, fallback))
		return 0, false
	}
	return d, true
}

// Backoff spaces the retries of a failing refresh: Initial after the first
// failure, doubling up to Max.
type Backoff struct {
	Initial, Max time.Duration
}

// Default backoff of a failing refresh: kubelet republishes every 60-90 s,
// so retries soon space out beyond its heartbeat.
const (
	DefaultBackoffInitial = time.Minute
	DefaultBackoffMax     = 15 * time.Minute
)

// After returns how long to wait after the failures-th failure in a row.
func (b Backoff) After(failures int) time.Duration {
	d := b.Initial
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Left returns how long the backoff after failures failures in a row, the
// last at lastFailure, still runs at now: 0 without a failure, once it has
// passed, or when the clock went back.
func (b Backoff) Left(failures int, lastFailure, now time.Time) time.Duration {
	if failures <= 0 {
		return 0
	}
	d := b.After(failures)
	if waited(lastFailure, now, d) {
		return 0
	}
	return d - now.Sub(lastFailure)
}

// Triggers are the values of RefreshAnnotation on a volume's class and pod
// ("" when not set).
type Triggers struct {
	Class string `json:"class,omitempty"`
	Pod   string `json:"pod,omitempty"`
}

// State is what a volume's record says about its refreshes.
type State struct {
	VolumeID string
	// LastRefresh is when the provider last answered successfully.
	LastRefresh time.Time
	// Failures counts the refreshes that failed in a row since then;
	// LastFailure is the last one.
	Failures    int
	LastFailure time.Time
	// Handled are the trigger values the volume last acted on.
	Handled Triggers
	// CutBackoff is Failures when a trigger last cut the backoff short
	// (0: none since the last success).
	CutBackoff int
}

// Decide returns what a republish (or a trigger) at now does with a
// mounted volume: one of the Decision constants. A new trigger value
// refreshes at once unless the policy is CreatedOnce, or the volume is
// backing off and may not cut it short (CanCutBackoff); a failing refresh
// is retried after the backoff whatever the policy (the volume is not
// what was asked for); Periodic refreshes once its interval passed.
// A clock set back makes every wait due: waiting for it to catch up could
// take anything.
func (p Policy) Decide(s State, t Triggers, now time.Time, b Backoff) string {
	if p.Kind == CreatedOnce {
		return DecisionSkippedByPolicy
	}
	backingOff := s.BackingOff(now, b)
	if (t.Class != "" && t.Class != s.Handled.Class) || (t.Pod != "" && t.Pod != s.Handled.Pod) {
		if backingOff && !s.CanCutBackoff() {
			return DecisionBackoff
		}
		return DecisionTriggered
	}
	if s.Failures > 0 {
		if !backingOff {
			return DecisionDue
		}
		return DecisionBackoff
	}
	if p.Kind != Periodic {
		return DecisionSkippedByPolicy
	}
	if waited(s.LastRefresh, now, p.Interval+p.share(s.VolumeID)) {
		return DecisionDue
	}
	return DecisionNotDue
}

// BackingOff reports whether the volume's refresh failed and its backoff
// has not passed at now.
func (s State) BackingOff(now time.Time, b Backoff) bool {
	return b.Left(s.Failures, s.LastFailure, now) > 0
}

// CanCutBackoff reports whether a new trigger value may cut the current
// backoff short: once per step (Failures), and not right after a
// triggered attempt that cut one short and failed, so that a stream of
// trigger values never calls the provider more than twice per backoff
// step: triggers cannot be used as a pump.
func (s State) CanCutBackoff() bool {
	return s.CutBackoff == 0 || s.CutBackoff < s.Failures-1
}

// waited reports whether d has passed since t, or the clock went back.
func waited(t, now time.Time, d time.Duration) bool {
	since := now.Sub(t)
	return since >= d || since < 0
}

// Wait is how long after its last refresh a Periodic refresh of the volume
// (or SecretSync) id falls due: Interval plus its fixed share of Jitter.
func (p Policy) Wait(id string) time.Duration {
	return p.Interval + p.share(id)
}

// share is the volume's fixed part of the jitter, in [0, Jitter).
func (p Policy) share(volumeID string) time.Duration {
	if p.Jitter <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(volumeID))
	return time.Duration(h.Sum64() % uint64(p.Jitter)) //nolint:gosec // G115: the modulus is positive and fits
}
