package driver

import (
	"time"

	"google.golang.org/grpc/codes"
)

// Metrics hears what the driver does, for its metrics endpoint. Every
// method must be cheap and must not block: they are called on kubelet's
// path. Deps.Metrics nil means none.
type Metrics interface {
	// NodePublish is one NodePublishVolume call: provider is the class's
	// provider ("" when it is not known), err nil on success.
	NodePublish(provider string, err error, took time.Duration)
	// NodeUnpublish is one NodeUnpublishVolume call.
	NodeUnpublish(err error, took time.Duration)
	// ProviderCall is one Mount call to a provider, with its gRPC code.
	ProviderCall(provider string, code codes.Code, took time.Duration)
	// RefreshDecision is one decision about a mounted volume (a republish
	// or a trigger): one of package rotation's Decision constants.
	RefreshDecision(decision string)
	// RotationReconcile is one refresh of a mounted volume (upstream's
	// rotation_reconcile_*): rotated says the files changed; errType is ""
	// on success, else a short class of the failure.
	RotationReconcile(provider string, rotated bool, errType string, took time.Duration)
}

type noMetrics struct{}

func (noMetrics) NodePublish(string, error, time.Duration)              {}
func (noMetrics) NodeUnpublish(error, time.Duration)                    {}
func (noMetrics) ProviderCall(string, codes.Code, time.Duration)        {}
func (noMetrics) RefreshDecision(string)                                {}
func (noMetrics) RotationReconcile(string, bool, string, time.Duration) {}
