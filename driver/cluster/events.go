package cluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/internal/kube"
)

// Event reasons on pods.
const (
	ReasonMountFailed   = "SecretMountFailed"
	ReasonRefreshFailed = "SecretRefreshFailed"
	ReasonRefreshed     = "SecretRefreshed"
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
		e.recorder.Eventf(ref, corev1.EventTypeWarning, ReasonMountFailed, "mounting secrets from %s failed: %v", className(o), o.Err)
	case o.Err != nil:
		e.recorder.Eventf(ref, corev1.EventTypeWarning, ReasonRefreshFailed,
			"refresh of %s failed, the files mounted before are kept: %v", className(o), o.Err)
	case o.Changed && !o.First:
		e.recorder.Eventf(ref, corev1.EventTypeNormal, ReasonRefreshed, "%s: new content mounted (%d objects)", className(o), len(o.Objects))
	}
}

func className(o *driver.Outcome) string {
	if o.Class == nil {
		return "the secrets volume"
	}
	return fmt.Sprintf("SecretProviderClass %s", o.Class.Name)
}
