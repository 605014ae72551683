package driver

import (
	"time"

	"google.golang.org/grpc/codes"
)

// Metrics hears what the driver does, for its metrics endpoint. Every
// method must be cheap and must not block: they are called on kubelet's
// path. Deps.Metrics nil means none.
type Metrics interface {
	// NodePublish is one successful NodePublishVolume call: provider is
	// the class's provider.
	NodePublish(provider string, took time.Duration)
	// NodePublishFailed is one failed NodePublishVolume call: provider as
	// for NodePublish ("" when it is not known), errorType upstream's
	// reason for the failure (errortype.go; it may be empty, as upstream's
	// is for a provider without a socket), code the gRPC code kubelet got.
	NodePublishFailed(provider, errorType string, code codes.Code, took time.Duration)
	// NodeUnpublish is one NodeUnpublishVolume call.
	NodeUnpublish(err error, took time.Duration)
	// ProviderCall is one Mount call to a provider, with its gRPC code.
	ProviderCall(provider string, code codes.Code, took time.Duration)
	// ProviderUnpublish is one Unpublish call of keymount's provider
	// extension after an unpublish, with its gRPC code (Unimplemented for
	// a provider without the extension).
	ProviderUnpublish(provider string, code codes.Code)
	// RefreshDecision is one decision about a mounted volume (a republish
	// or a trigger): one of package rotation's Decision constants.
	RefreshDecision(decision string)
	// RotationReconcile is one refresh of a mounted volume (upstream's
	// rotation_reconcile_*): rotated says the files changed; errType is ""
	// on success, else upstream's reason for the failure (errortype.go).
	RotationReconcile(provider string, rotated bool, errType string, took time.Duration)
}

type noMetrics struct{}

func (noMetrics) NodePublish(string, time.Duration)                           {}
func (noMetrics) NodePublishFailed(string, string, codes.Code, time.Duration) {}
func (noMetrics) NodeUnpublish(error, time.Duration)                          {}
func (noMetrics) ProviderCall(string, codes.Code, time.Duration)              {}
func (noMetrics) ProviderUnpublish(string, codes.Code)                        {}
func (noMetrics) RefreshDecision(string)                                      {}
func (noMetrics) RotationReconcile(string, bool, string, time.Duration)       {}
