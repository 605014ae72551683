package podstatus

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver"
)

// MaxMessageBytes bounds a condition message: an error text longer than this
// is cut (on a UTF-8 boundary).
const MaxMessageBytes = 1024

// desired is what one publish outcome asks the pod status to say. It is
// computed once per Publish and applied to whatever object is read, again
// after a conflict.
type desired struct {
	podName, podUID, class, targetPath string
	generation                         int64
	// classKnown is false for a refresh that failed because the class is
	// gone: the mounted files are still those of the stored generation,
	// and whether they are synced is unknown, so both stay as stored.
	classKnown bool
	objects    []secretsstorev1.SecretProviderClassObject
	// lastRefresh is truncated to seconds; nil when the outcome has none.
	lastRefresh      *metav1.Time
	mounted, current metav1.Condition
	synced           *metav1.Condition
	// policy is a False RotationPolicyValid naming the class's invalid
	// rotation annotations, nil when they are valid.
	policy  *metav1.Condition
	handled *secretsstorev1.HandledRefresh
	// contentChanged is a True ContentChanged when this outcome is a
	// refresh that changed the content, nil otherwise (the stored
	// condition stays as it is).
	contentChanged *metav1.Condition
}

func (w *Writer) desired(o *driver.Outcome, synced *metav1.Condition) *desired {
	now := metav1.NewTime(w.clk.Now().Truncate(time.Second))
	// A refresh that failed because the class is gone has no generation.
	var gen int64
	if o.Class != nil {
		gen = o.Class.Generation
	}
	d := &desired{
		podName: o.PodName, podUID: o.PodUID, class: o.ClassName, targetPath: o.TargetPath,
		generation: gen, classKnown: o.Class != nil,
		mounted: metav1.Condition{
			Type: secretsstorev1.ConditionMounted, Status: metav1.ConditionTrue, Reason: ReasonMounted,
			ObservedGeneration: gen, LastTransitionTime: now,
		},
		current: metav1.Condition{
			Type: secretsstorev1.ConditionCurrent, Status: metav1.ConditionTrue, Reason: ReasonRefreshed,
			ObservedGeneration: gen, LastTransitionTime: now,
		},
	}
	if o.Err != nil {
		d.current.Status = metav1.ConditionFalse
		d.current.Reason = ReasonRefreshFailed
		d.current.Message = truncate(o.Err.Error(), MaxMessageBytes)
	}
	for _, obj := range o.Objects {
		d.objects = append(d.objects, secretsstorev1.SecretProviderClassObject{ID: obj.ID, Version: obj.Version})
	}
	if o.Changed && !o.First && o.Err == nil {
		d.contentChanged = &metav1.Condition{
			Type: secretsstorev1.ConditionContentChanged, Status: metav1.ConditionTrue, Reason: ReasonObjectsChanged,
			ObservedGeneration: gen, LastTransitionTime: now,
			Message: "a refresh changed the mounted content: keymount-controller restarts the workload when the pod or its class sets keymount.io/restart-on-change",
		}
	}
	if o.Handled.Class != "" || o.Handled.Pod != "" {
		d.handled = &secretsstorev1.HandledRefresh{Class: o.Handled.Class, Pod: o.Handled.Pod}
	}
	if len(o.PolicyProblems) > 0 {
		d.policy = &metav1.Condition{
			Type: secretsstorev1.ConditionRotationPolicy, Status: metav1.ConditionFalse, Reason: ReasonInvalidAnnotation,
			ObservedGeneration: gen, LastTransitionTime: now,
			Message: truncate(strings.Join(o.PolicyProblems, "; "), MaxMessageBytes),
		}
	}
	slices.SortFunc(d.objects, func(a, b secretsstorev1.SecretProviderClassObject) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Version, b.Version))
	})
	if !o.LastRefresh.IsZero() {
		t := metav1.NewTime(o.LastRefresh.Truncate(time.Second))
		d.lastRefresh = &t
	}
	if synced != nil {
		s := *synced
		s.Type = secretsstorev1.ConditionSecretsSynced
		s.ObservedGeneration = gen
		s.Message = truncate(s.Message, MaxMessageBytes)
		s.LastTransitionTime = metav1.NewTime(s.LastTransitionTime.Truncate(time.Second))
		if s.LastTransitionTime.IsZero() {
			s.LastTransitionTime = now
		}
		d.synced = &s
	}
	return d
}

// apply makes st say what d says and reports whether st changed. See the
// package documentation for when lastRefreshTime changes.
func (d *desired) apply(st *secretsstorev1.SecretProviderClassPodStatus, node string, granularity time.Duration) bool {
	before := st.DeepCopy()
	if st.Labels == nil {
		st.Labels = map[string]string{}
	}
	st.Labels[secretsstorev1.InternalNodeLabel] = node
	if d.podUID != "" {
		st.OwnerReferences = withPodOwner(st.OwnerReferences, metav1.OwnerReference{
			APIVersion: "v1", Kind: "Pod", Name: d.podName, UID: types.UID(d.podUID),
		})
	}
	s := &st.Status
	s.PodName = d.podName
	s.SecretProviderClassName = d.class
	s.Mounted = true
	s.TargetPath = d.targetPath
	s.Objects = slices.Clone(d.objects)
	if d.classKnown {
		s.ObservedGeneration = d.generation
	}
	mounted, current := d.mounted, d.current
	mounted.ObservedGeneration, current.ObservedGeneration = s.ObservedGeneration, s.ObservedGeneration
	meta.SetStatusCondition(&s.Conditions, mounted)
	meta.SetStatusCondition(&s.Conditions, current)
	switch {
	case d.synced != nil:
		meta.SetStatusCondition(&s.Conditions, *d.synced)
	case d.classKnown:
		meta.RemoveStatusCondition(&s.Conditions, secretsstorev1.ConditionSecretsSynced)
	}
	switch {
	case d.policy != nil:
		policy := *d.policy
		policy.ObservedGeneration = s.ObservedGeneration
		meta.SetStatusCondition(&s.Conditions, policy)
	case d.classKnown:
		meta.RemoveStatusCondition(&s.Conditions, secretsstorev1.ConditionRotationPolicy)
	}
	if d.contentChanged != nil {
		c := *d.contentChanged
		c.ObservedGeneration = s.ObservedGeneration
		meta.SetStatusCondition(&s.Conditions, c)
	}
	s.HandledRefresh = d.handled.DeepCopy()
	changed := !equality.Semantic.DeepEqual(before, st)

	old := s.LastRefreshTime
	if d.lastRefresh == nil || (!changed && old != nil && (granularity < 0 || d.lastRefresh.Sub(old.Time) <= granularity)) {
		return changed
	}
	s.LastRefreshTime = d.lastRefresh.DeepCopy()
	return changed || !equality.Semantic.DeepEqual(old, s.LastRefreshTime)
}

// withPodOwner puts want in place of the first pod owner reference in refs
// (a pod recreated with the same name has a new UID), drops any other pod
// reference and keeps the rest in order.
func withPodOwner(refs []metav1.OwnerReference, want metav1.OwnerReference) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(refs)+1)
	placed := false
	for _, r := range refs {
		switch {
		case !isPodRef(r):
			out = append(out, r)
		case !placed:
			out = append(out, want)
			placed = true
		}
	}
	if !placed {
		out = append(out, want)
	}
	return out
}

func isPodRef(r metav1.OwnerReference) bool {
	return r.APIVersion == "v1" && r.Kind == "Pod"
}

func validateSynced(c *metav1.Condition) error {
	if c == nil {
		return nil
	}
	if c.Type != "" && c.Type != secretsstorev1.ConditionSecretsSynced {
		return fmt.Errorf("%w: type %q", ErrInvalidCondition, c.Type)
	}
	switch c.Status {
	case metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown:
	default:
		return fmt.Errorf("%w: status %q", ErrInvalidCondition, c.Status)
	}
	if c.Reason == "" {
		return fmt.Errorf("%w: empty reason", ErrInvalidCondition)
	}
	return nil
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
