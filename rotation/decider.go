package rotation

import "time"

// Source reads keymount's annotations of classes and pods from the
// driver's caches, never from the API server: it is asked on every
// republish. nil maps mean none, or not known yet.
type Source interface {
	ClassAnnotations(namespace, name string) map[string]string
	PodAnnotations(namespace, name string) map[string]string
}

// Decider decides, per republish or trigger, whether a mounted volume is
// refreshed: from the node's defaults, its class's policy annotations, the
// trigger annotations of its class and pod, and its record.
type Decider struct {
	Node    NodeDefaults
	Backoff Backoff
	// Source is nil without a cluster: the node's defaults apply, no
	// trigger is seen.
	Source Source
}

// Decision is what a Decider decided for one volume.
type Decision struct {
	// Verdict is one of the Decision constants.
	Verdict string
	// Triggers are the trigger values now set: a refresh records them as
	// handled.
	Triggers Triggers
	// Problems are the class's invalid annotations, each naming the
	// annotation and the fix; their defaults applied.
	Problems []error
	// CutBackoff says a trigger refreshes a volume whose failing refresh
	// was backing off: the record keeps State.Failures as State.CutBackoff.
	CutBackoff bool
}

// Refreshes reports whether the volume is refreshed.
func (d Decision) Refreshes() bool {
	return d.Verdict == DecisionDue || d.Verdict == DecisionTriggered
}

// Decide decides for the volume of s, of pod namespace/pod and its class.
func (d *Decider) Decide(s State, namespace, pod, class string, now time.Time) Decision {
	var classAnn, podAnn map[string]string
	if d.Source != nil {
		classAnn = d.Source.ClassAnnotations(namespace, class)
		podAnn = d.Source.PodAnnotations(namespace, pod)
	}
	p, problems := ForClass(classAnn, d.Node)
	t := Triggers{Class: classAnn[RefreshAnnotation], Pod: podAnn[RefreshAnnotation]}
	b := d.backoff()
	verdict := p.Decide(s, t, now, b)
	cut := verdict == DecisionTriggered && s.BackingOff(now, b)
	return Decision{Verdict: verdict, Triggers: t, Problems: problems, CutBackoff: cut}
}

// Current returns the trigger values now set and the class's annotation
// problems, for a first publish: it records them as handled.
func (d *Decider) Current(namespace, pod, class string) (Triggers, []error) {
	if d.Source == nil {
		return Triggers{}, nil
	}
	classAnn := d.Source.ClassAnnotations(namespace, class)
	_, problems := ForClass(classAnn, d.Node)
	return Triggers{Class: classAnn[RefreshAnnotation], Pod: d.Source.PodAnnotations(namespace, pod)[RefreshAnnotation]}, problems
}

func (d *Decider) backoff() Backoff {
	b := d.Backoff
	if b.Initial <= 0 {
		b.Initial = DefaultBackoffInitial
	}
	if b.Max < b.Initial {
		b.Max = max(DefaultBackoffMax, b.Initial)
	}
	return b
}
