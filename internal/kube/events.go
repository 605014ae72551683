package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// EventSink writes the events of client-go's event broadcaster
// (record.NewBroadcaster) through an API: what client-go's typed events
// client does, without its clientset.
type EventSink struct {
	api *API
}

var _ record.EventSink = (*EventSink)(nil)

// NewEventSink returns a sink writing through api.
func NewEventSink(api *API) *EventSink { return &EventSink{api: api} }

// Create creates the event in its namespace.
func (s *EventSink) Create(event *corev1.Event) (*corev1.Event, error) {
	out := event.DeepCopy()
	return out, s.api.Create(context.Background(), out, "")
}

// Update replaces the event.
func (s *EventSink) Update(event *corev1.Event) (*corev1.Event, error) {
	out := event.DeepCopy()
	return out, s.api.Update(context.Background(), out)
}

// Patch applies the strategic merge patch data to the event old names.
func (s *EventSink) Patch(old *corev1.Event, data []byte) (*corev1.Event, error) {
	out := &corev1.Event{}
	out.Namespace, out.Name = old.Namespace, old.Name
	return out, s.api.Patch(context.Background(), out, types.StrategicMergePatchType, data, "")
}
