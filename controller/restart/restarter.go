package restart

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/rotation"
)

// RBACComponent is the kustomize component with the rules a restart needs,
// bound to keymount-controller's ServiceAccount.
const RBACComponent = "deploy/components/restart-on-change"

const (
	// maxListed bounds the objects an event names.
	maxListed = 10
	// maxAttempts bounds the patches of one workload in one Restart that
	// fail because it changed since it was read (its status changes too).
	maxAttempts = 4
)

// Restarter restarts the workloads that opted in to a restart on change.
// It is safe for concurrent use. keymount-controller runs it (package
// documentation); the node driver holds no rule on workloads.
type Restarter struct {
	apps rest.Interface
	rec  record.EventRecorder
}

// New returns a Restarter. apps is a REST client of GroupVersion (see
// kube.NewRESTClient); rec records events on pods and workloads (nil:
// none).
func New(apps rest.Interface, rec record.EventRecorder) *Restarter {
	return &Restarter{apps: apps, rec: rec}
}

// Change is a refresh that changed the content of a mounted volume.
type Change struct {
	// Pod is the pod of the volume: its metadata (owner references,
	// keymount's annotations), its CSI volumes and its containers' volume
	// mounts are read.
	Pod *corev1.Pod
	// Class is the volume's class: its name and keymount's annotations
	// are read.
	Class *secretsstorev1.SecretProviderClass
	// Objects are the objects the volume holds now, with their versions.
	Objects []secretsstorev1.SecretProviderClassObject
}

// Result is what Restart did.
type Result struct {
	// Workload is the pod's workload, zero when there is none (Skipped
	// says why) or the pod did not opt in.
	Workload Workload
	// Key and Value are the pod-template annotation that restarts it.
	Key, Value string
	// Patched says this call changed the pod template; false when it
	// already carried the value.
	Patched bool
	// Generation is the workload's generation after the call.
	Generation int64
	// Skipped says why a pod that opted in has no workload to restart, or
	// why its workload is not restarted (Stale).
	Skipped string
	// Stale says the pod is older than its workload's last restart for
	// this class: the pod's own copy of the annotation differs from the
	// template's, so the change it reports is not the workload's latest
	// and nothing is written.
	Stale bool
}

// Enabled reports whether a change of class's volume in pod restarts the
// pod's workload (rotation.RestartEnabled): the pod's RestartAnnotation
// decides when it is a boolean ("true", "false"), else the class's; off
// when neither says true.
func Enabled(pod *corev1.Pod, class *secretsstorev1.SecretProviderClass) bool {
	var p, c map[string]string
	if pod != nil {
		p = pod.Annotations
	}
	if class != nil {
		c = class.Annotations
	}
	return rotation.RestartEnabled(p, c)
}

// Restart restarts the workload of c.Pod when the pod or its class opted
// in (Enabled): it makes sure the workload's pod template carries
// AnnotationKey(class) = AnnotationValue(objects), writing only when it
// does not. It records an event on the workload when it writes, and on the
// pod when there is no workload to restart or the API server refused. The
// error is the API server's, wrapped; a forbidden request's error names
// RBACComponent.
func (r *Restarter) Restart(ctx context.Context, c Change) (Result, error) {
	if !Enabled(c.Pod, c.Class) {
		return Result{}, nil
	}
	w, err := r.Owner(ctx, c.Pod)
	if errors.Is(err, ErrNoWorkload) {
		return r.skipped(c, err), nil
	}
	if err != nil {
		return Result{}, r.failed(c, err)
	}
	res := Result{Workload: w, Key: AnnotationKey(c.Class.Name), Value: AnnotationValue(c.Objects)}
	podValue := c.Pod.Annotations[res.Key]
	stale := func(current string) string {
		if current == podValue {
			return ""
		}
		res.Stale = true
		return fmt.Sprintf("the pod is older than the last restart of %s (pod template annotation %s=%q, the pod's %q)",
			w, res.Key, current, podValue)
	}
	for attempt := 1; ; attempt++ {
		done, err := r.ensure(ctx, &res, stale)
		switch {
		case errors.Is(err, ErrNoWorkload):
			return r.skipped(c, err), nil
		case apierrors.IsConflict(err) && attempt < maxAttempts:
			continue // changed since the read: read again
		case err != nil:
			return Result{}, r.failed(c, err)
		case res.Skipped != "":
			return res, nil
		case done:
			if res.Patched {
				r.event(w.Reference(), corev1.EventTypeNormal, ReasonRestarting,
					fmt.Sprintf("restarting: SecretProviderClass %s changed: objects %s (pod template annotation %s=%s)",
						c.Class.Name, objectList(c.Objects), res.Key, res.Value))
			}
			return res, nil
		}
	}
}

// ensure reads res.Workload and, unless its pod template carries res.Key =
// res.Value, patches it, on condition that it did not change since the
// read: a conflict means it did (another replica may have set the value),
// and the caller reads again. skip, given the template's current value of
// res.Key, returns why not to patch ("": patch); its answer goes to
// res.Skipped. ensure reports whether the template carries the value or
// the patch was skipped.
func (r *Restarter) ensure(ctx context.Context, res *Result, skip func(current string) string) (bool, error) {
	w := res.Workload
	t, err := r.template(ctx, w)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && t.Metadata.UID != w.UID):
		return false, fmt.Errorf("%w: %s is gone", ErrNoWorkload, w)
	case err != nil:
		return false, fmt.Errorf("read %s: %w", w, err)
	}
	res.Generation = t.Metadata.Generation
	current := t.Spec.Template.Metadata.Annotations[res.Key]
	if current == res.Value {
		return true, nil // this change restarted it already
	}
	if why := skip(current); why != "" {
		res.Skipped = why
		return true, nil
	}
	t, err = r.annotate(ctx, w, t.Metadata.ResourceVersion, res.Key, res.Value)
	switch {
	case apierrors.IsNotFound(err):
		return false, fmt.Errorf("%w: %s is gone", ErrNoWorkload, w)
	case err != nil:
		return false, fmt.Errorf("patch %s: %w", w, err)
	}
	res.Patched, res.Generation = true, t.Metadata.Generation
	return true, nil
}

// skipped tells the pod why its workload is not restarted.
func (r *Restarter) skipped(c Change, why error) Result {
	r.event(podRef(c.Pod), corev1.EventTypeNormal, ReasonRestartSkipped,
		fmt.Sprintf("not restarting for the change of SecretProviderClass %s: %v", c.Class.Name, why))
	return Result{Skipped: why.Error()}
}

// failed tells the pod that the API server refused, and returns the error;
// a forbidden request names the RBAC component.
func (r *Restarter) failed(c Change, err error) error {
	if apierrors.IsForbidden(err) {
		err = fmt.Errorf("%w: install the RBAC component %s to restart workloads", err, RBACComponent)
	}
	err = fmt.Errorf("restart for the change of SecretProviderClass %s: %w", c.Class.Name, err)
	r.event(podRef(c.Pod), corev1.EventTypeWarning, ReasonRestartFailed, err.Error())
	return err
}

func (r *Restarter) event(ref *corev1.ObjectReference, eventType, reason, message string) {
	if r.rec != nil {
		r.rec.Event(ref, eventType, reason, message)
	}
}

// podRef is the pod as events name it.
func podRef(p *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

// objectList names objects by ID, sorted, at most maxListed of them.
func objectList(objects []secretsstorev1.SecretProviderClassObject) string {
	ids := make([]string, 0, len(objects))
	for _, o := range objects {
		ids = append(ids, o.ID)
	}
	slices.Sort(ids)
	if len(ids) > maxListed {
		return fmt.Sprintf("%s and %d more", strings.Join(ids[:maxListed], ", "), len(ids)-maxListed)
	}
	return strings.Join(ids, ", ")
}
