package cluster

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/rotation"
)

// eventComponent is the source of keymount's events.
const eventComponent = "keymount"

type eventSink struct {
	recorder record.EventRecorder
}

func newEventSink(ctx context.Context, cfg *rest.Config, node string) (*eventSink, error) {
	api, err := kube.NewAPI(cfg)
	if err != nil {
		return nil, fmt.Errorf("events client: %w", err)
	}
	scheme, err := kube.NewScheme()
	if err != nil {
		return nil, err
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(kube.NewEventSink(api))
	go func() {
		<-ctx.Done()
		b.Shutdown()
	}()
	return &eventSink{recorder: b.NewRecorder(scheme, corev1.EventSource{Component: eventComponent, Host: node})}, nil
}

// podRef is the object an event about a volume is recorded on.
func podRef(o *driver.Outcome) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: "v1", Kind: "Pod",
		Namespace: o.PodNamespace, Name: o.PodName, UID: types.UID(o.PodUID),
	}
}

// published tells the pod what a publish did: why a mount or refresh
// failed, and that the files changed. Messages carry names and errors,
// never secret values.
func (e *eventSink) published(o *driver.Outcome) {
	ref := podRef(o)
	switch {
	case o.First && o.Err != nil:
		e.recorder.Eventf(ref, corev1.EventTypeWarning, ReasonSecretMountFailed, "mounting secrets from %s failed: %v", className(o), o.Err)
	case o.Err != nil:
		e.recorder.Eventf(ref, corev1.EventTypeWarning, ReasonSecretRefreshFailed,
			"refresh of %s failed, the files mounted before are kept: %v", className(o), o.Err)
	case o.Changed && !o.First:
		e.recorder.Eventf(ref, corev1.EventTypeNormal, ReasonSecretRefreshed, "%s: new content mounted: %s", className(o), versionChanges(o.Previous, o.Objects))
	case o.Triggered && !o.First:
		e.recorder.Eventf(ref, corev1.EventTypeNormal, ReasonSecretRefreshed, "%s: refreshed on request (%s %q): nothing changed",
			className(o), rotation.RefreshAnnotation, triggerValue(o))
	}
	if o.First && o.Err == nil {
		for _, p := range o.PolicyProblems {
			e.recorder.Eventf(ref, corev1.EventTypeWarning, ReasonInvalidRotationAnnotation, "%s: %s", className(o), p)
		}
	}
}

// triggerValue is the trigger value a triggered refresh acted on: the
// pod's when it has one, else the class's.
func triggerValue(o *driver.Outcome) string {
	if o.Handled.Pod != "" {
		return o.Handled.Pod
	}
	return o.Handled.Class
}

// maxListedChanges bounds the objects an event lists.
const maxListedChanges = 10

// versionChanges says which objects changed, old → new version, for an
// event: names and versions only.
func versionChanges(before, after []volume.Object) string {
	old := make(map[string]string, len(before))
	for _, o := range before {
		old[o.ID] = o.Version
	}
	var parts []string
	for _, o := range after {
		v, ok := old[o.ID]
		switch {
		case !ok:
			parts = append(parts, fmt.Sprintf("%s (new) %s", o.ID, o.Version))
		case v != o.Version:
			parts = append(parts, fmt.Sprintf("%s %s → %s", o.ID, v, o.Version))
		}
		delete(old, o.ID)
	}
	for _, o := range before {
		if _, gone := old[o.ID]; gone {
			parts = append(parts, o.ID+" (removed)")
		}
	}
	switch {
	case len(parts) == 0:
		return fmt.Sprintf("%d objects, versions unchanged (the provider reports none that differ)", len(after))
	case len(parts) > maxListedChanges:
		return strings.Join(parts[:maxListedChanges], ", ") + fmt.Sprintf(" and %d more", len(parts)-maxListedChanges)
	}
	return strings.Join(parts, ", ")
}

func className(o *driver.Outcome) string {
	if o.Class == nil {
		return "the secrets volume"
	}
	return fmt.Sprintf("SecretProviderClass %s", o.Class.Name)
}
