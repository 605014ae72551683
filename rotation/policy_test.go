package rotation

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

var last = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestDecide(t *testing.T) {
	b := Backoff{Initial: time.Minute, Max: 8 * time.Minute}
	periodic := Policy{Kind: Periodic, Interval: 2 * time.Minute}
	for _, tc := range []struct {
		name string
		p    Policy
		s    State
		t    Triggers
		now  time.Time
		want string
	}{
		{"periodic, before the interval", periodic, State{LastRefresh: last}, Triggers{}, last.Add(119 * time.Second), DecisionNotDue},
		{"periodic, at the interval", periodic, State{LastRefresh: last}, Triggers{}, last.Add(2 * time.Minute), DecisionDue},
		{"periodic, interval 0: every republish", Policy{Kind: Periodic}, State{LastRefresh: last}, Triggers{}, last, DecisionDue},
		{"periodic, clock set back", periodic, State{LastRefresh: last}, Triggers{}, last.Add(-time.Hour), DecisionDue},
		{"on demand: never by time", Policy{Kind: OnDemand, Interval: time.Minute}, State{LastRefresh: last}, Triggers{}, last.Add(24 * time.Hour), DecisionSkippedByPolicy},
		{"on demand: a new class trigger", Policy{Kind: OnDemand}, State{LastRefresh: last, Handled: Triggers{Class: "1"}}, Triggers{Class: "2"}, last, DecisionTriggered},
		{"on demand: a new pod trigger", Policy{Kind: OnDemand}, State{LastRefresh: last}, Triggers{Pod: "a"}, last, DecisionTriggered},
		{"on demand: the handled trigger again", Policy{Kind: OnDemand}, State{LastRefresh: last, Handled: Triggers{Class: "1", Pod: "a"}}, Triggers{Class: "1", Pod: "a"}, last.Add(time.Hour), DecisionSkippedByPolicy},
		{"on demand: a trigger removed is no request", Policy{Kind: OnDemand}, State{LastRefresh: last, Handled: Triggers{Class: "1"}}, Triggers{}, last.Add(time.Hour), DecisionSkippedByPolicy},
		{"created once: a trigger does nothing", Policy{Kind: CreatedOnce}, State{LastRefresh: last}, Triggers{Class: "2"}, last.Add(time.Hour), DecisionSkippedByPolicy},
		{"created once: not even after failures", Policy{Kind: CreatedOnce}, State{LastRefresh: last, Failures: 3, LastFailure: last}, Triggers{}, last.Add(time.Hour), DecisionSkippedByPolicy},
		{"failed once: backing off", periodic, State{LastRefresh: last, Failures: 1, LastFailure: last.Add(2 * time.Minute)}, Triggers{}, last.Add(2*time.Minute + 59*time.Second), DecisionBackoff},
		{"failed once: retried after the backoff", periodic, State{LastRefresh: last, Failures: 1, LastFailure: last.Add(2 * time.Minute)}, Triggers{}, last.Add(3 * time.Minute), DecisionDue},
		{"failed three times: waits 4m", periodic, State{LastRefresh: last, Failures: 3, LastFailure: last}, Triggers{}, last.Add(3 * time.Minute), DecisionBackoff},
		{"failed three times: due at 4m", periodic, State{LastRefresh: last, Failures: 3, LastFailure: last}, Triggers{}, last.Add(4 * time.Minute), DecisionDue},
		{"on demand, failed: retried after the backoff", Policy{Kind: OnDemand}, State{LastRefresh: last, Failures: 1, LastFailure: last}, Triggers{}, last.Add(time.Minute), DecisionDue},
		{"a new trigger skips the backoff", periodic, State{LastRefresh: last, Failures: 5, LastFailure: last}, Triggers{Pod: "x"}, last, DecisionTriggered},
		{"a trigger after the cut attempt failed waits", periodic, State{LastRefresh: last, Failures: 6, LastFailure: last, CutBackoff: 5}, Triggers{Pod: "y"}, last.Add(time.Minute), DecisionBackoff},
		{"the next step may be cut again", periodic, State{LastRefresh: last, Failures: 7, LastFailure: last, CutBackoff: 5}, Triggers{Pod: "y"}, last.Add(time.Minute), DecisionTriggered},
		{"a step already cut waits", periodic, State{LastRefresh: last, Failures: 5, LastFailure: last, CutBackoff: 5}, Triggers{Pod: "z"}, last.Add(time.Minute), DecisionBackoff},
		{"a trigger after the backoff needs no cut", periodic, State{LastRefresh: last, Failures: 6, LastFailure: last, CutBackoff: 5}, Triggers{Pod: "y"}, last.Add(8 * time.Minute), DecisionTriggered},
	} {
		if got := tc.p.Decide(tc.s, tc.t, tc.now, b); got != tc.want {
			t.Errorf("%s: Decide = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestTriggersCannotPumpThroughBackoff: a stream of new trigger values
// against a refresh that keeps failing calls the provider at most twice
// per backoff step: once when a trigger cuts a step short, once when the
// step's retry is due. Each attempt fails; the record keeps what the
// driver keeps (Failures, LastFailure, CutBackoff).
func TestTriggersCannotPumpThroughBackoff(t *testing.T) {
	b := Backoff{Initial: time.Minute, Max: 4 * time.Minute}
	src := &fakeSource{}
	d := &Decider{Node: NodeDefaults{}, Backoff: b, Source: src}
	s := State{VolumeID: "v", LastRefresh: last, Failures: 1, LastFailure: last}
	now := last
	attempts, cuts := 0, 0
	const step = 10 * time.Second // the --min-refresh-interval default
	for i := range 360 {          // an hour of a new value every 10 s
		now = now.Add(step)
		src.class = map[string]string{RefreshAnnotation: strconv.Itoa(i)}
		dec := d.Decide(s, "ns", "pod", "class", now)
		if !dec.Refreshes() {
			continue
		}
		attempts++
		if dec.CutBackoff {
			cuts++
			s.CutBackoff = s.Failures
		}
		s.Failures++
		s.LastFailure = now
		s.Handled = dec.Triggers
	}
	t.Logf("%d attempts, %d cut the backoff", attempts, cuts)
	// At the 4m maximum an hour holds 15 steps: at most 2 calls each.
	if attempts > 2*15+4 {
		t.Errorf("%d provider calls in an hour of triggers every %s against a failing refresh, want at most about 2 per %s step",
			attempts, step, b.Max)
	}
	if cuts == 0 || cuts > attempts/2+1 {
		t.Errorf("%d of %d attempts cut the backoff short, want about half", cuts, attempts)
	}
}

func TestBackoffDoublesUpToMax(t *testing.T) {
	b := Backoff{Initial: 30 * time.Second, Max: 5 * time.Minute}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		if got := b.After(i + 1); got != w {
			t.Errorf("After(%d) = %s, want %s", i+1, got, w)
		}
	}
	if got := b.After(1 << 20); got != b.Max {
		t.Errorf("After(many) = %s, want the max %s", got, b.Max)
	}
}

func TestJitterIsFixedPerVolumeAndBounded(t *testing.T) {
	p := Policy{Kind: Periodic, Interval: time.Minute, Jitter: time.Minute}
	seen := map[time.Duration]bool{}
	for i := range 50 {
		id := "csi-" + strings.Repeat("x", i)
		s := p.share(id)
		if s < 0 || s >= p.Jitter {
			t.Fatalf("share(%q) = %s, want in [0, %s)", id, s, p.Jitter)
		}
		if s != p.share(id) {
			t.Fatalf("share(%q) differs between calls", id)
		}
		seen[s] = true
		st := State{VolumeID: id, LastRefresh: last}
		if got := p.Decide(st, Triggers{}, last.Add(time.Minute+s-time.Nanosecond), Backoff{}); got != DecisionNotDue {
			t.Errorf("%q just before interval+share: %s, want not due", id, got)
		}
		if got := p.Decide(st, Triggers{}, last.Add(time.Minute+s), Backoff{}); got != DecisionDue {
			t.Errorf("%q at interval+share: %s, want due", id, got)
		}
	}
	if len(seen) < 40 {
		t.Errorf("50 volumes got only %d distinct shares of the jitter: they would refresh in step", len(seen))
	}
}

func TestForClass(t *testing.T) {
	on := NodeDefaults{Enabled: true, Interval: 2 * time.Minute}
	off := NodeDefaults{Interval: 2 * time.Minute}
	for _, tc := range []struct {
		name     string
		ann      map[string]string
		node     NodeDefaults
		want     Policy
		problems []string
	}{
		{"no annotations, rotation on", nil, on, Policy{Kind: Periodic, Interval: 2 * time.Minute}, nil},
		{"no annotations, rotation off: triggers only", nil, off, Policy{Kind: OnDemand, Interval: 2 * time.Minute}, nil},
		{"created once", map[string]string{PolicyAnnotation: "CreatedOnce"}, on, Policy{Kind: CreatedOnce, Interval: 2 * time.Minute}, nil},
		{"policy is case-insensitive", map[string]string{PolicyAnnotation: " ondemand "}, on, Policy{Kind: OnDemand, Interval: 2 * time.Minute}, nil},
		{"an interval alone turns periodic on", map[string]string{IntervalAnnotation: "10m"}, off, Policy{Kind: Periodic, Interval: 10 * time.Minute}, nil},
		{"an interval with on demand stays on demand", map[string]string{IntervalAnnotation: "10m", PolicyAnnotation: "OnDemand"}, on, Policy{Kind: OnDemand, Interval: 10 * time.Minute}, nil},
		{"jitter", map[string]string{PolicyAnnotation: "Periodic", JitterAnnotation: "30s"}, off, Policy{Kind: Periodic, Interval: 2 * time.Minute, Jitter: 30 * time.Second}, nil},
		{
			"invalid values: node defaults, each named",
			map[string]string{PolicyAnnotation: "Sometimes", IntervalAnnotation: "-1m", JitterAnnotation: "lots"},
			on, Policy{Kind: Periodic, Interval: 2 * time.Minute},
			[]string{PolicyAnnotation, IntervalAnnotation, JitterAnnotation},
		},
		{"unit-less interval is invalid", map[string]string{IntervalAnnotation: "600"}, off, Policy{Kind: OnDemand, Interval: 2 * time.Minute}, []string{IntervalAnnotation}},
	} {
		got, errs := ForClass(tc.ann, tc.node)
		if got != tc.want {
			t.Errorf("%s: policy %+v, want %+v", tc.name, got, tc.want)
		}
		if len(errs) != len(tc.problems) {
			t.Errorf("%s: problems %v, want %d naming %v", tc.name, errs, len(tc.problems), tc.problems)
			continue
		}
		for _, name := range tc.problems {
			if !strings.Contains(errors.Join(errs...).Error(), "annotation "+name+":") {
				t.Errorf("%s: problems %v do not name %s", tc.name, errs, name)
			}
		}
	}
}

type fakeSource struct{ class, pod map[string]string }

func (f fakeSource) ClassAnnotations(_, _ string) map[string]string { return f.class }
func (f fakeSource) PodAnnotations(_, _ string) map[string]string   { return f.pod }

func TestDeciderReadsTheSource(t *testing.T) {
	d := &Decider{Node: NodeDefaults{}, Source: fakeSource{
		class: map[string]string{RefreshAnnotation: "c2", PolicyAnnotation: "bogus"},
		pod:   map[string]string{RefreshAnnotation: "p1"},
	}}
	dec := d.Decide(State{LastRefresh: last, Handled: Triggers{Class: "c1", Pod: "p1"}}, "ns", "pod", "class", last)
	if dec.Verdict != DecisionTriggered || dec.Triggers != (Triggers{Class: "c2", Pod: "p1"}) || len(dec.Problems) != 1 || !dec.Refreshes() {
		t.Errorf("Decide = %+v, want triggered by the class, triggers {c2 p1}, one problem", dec)
	}
	tr, problems := d.Current("ns", "pod", "class")
	if tr != (Triggers{Class: "c2", Pod: "p1"}) || len(problems) != 1 {
		t.Errorf("Current = %+v, %v", tr, problems)
	}
	none := &Decider{Node: NodeDefaults{Enabled: true}}
	if dec := none.Decide(State{LastRefresh: last}, "ns", "pod", "class", last); dec.Verdict != DecisionDue || dec.Triggers != (Triggers{}) {
		t.Errorf("without a source, rotation on at 0s: %+v, want due", dec)
	}
}
