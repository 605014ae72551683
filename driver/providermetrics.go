package driver

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"k8s.io/utils/clock"

	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// MeteredProviders returns p with every Mount call timed into
// m.ProviderCall, with the call's gRPC code (OK for success). A publish
// learns from it which provider its volume's class names (see nodeServer).
func MeteredProviders(p ProviderClient, m Metrics) ProviderClient {
	return &meteredProviders{p: p, m: m, clock: clock.RealClock{}}
}

type meteredProviders struct {
	p     ProviderClient
	m     Metrics
	clock clock.PassiveClock
}

func (mp *meteredProviders) Mount(ctx context.Context, provider string, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	if s, ok := ctx.Value(providerSlotKey{}).(*providerSlot); ok {
		s.name.Store(&provider)
	}
	start := mp.clock.Now()
	resp, err := mp.p.Mount(ctx, provider, req)
	code := codes.OK
	if err != nil {
		code = codeOf(err)
	}
	mp.m.ProviderCall(provider, code, mp.clock.Since(start))
	return resp, err
}

// Unpublish is the provider's, untimed: the driver counts its outcome
// (Metrics.ProviderUnpublish).
func (mp *meteredProviders) Unpublish(ctx context.Context, provider string, req *keymountv1.UnpublishRequest) error {
	return mp.p.Unpublish(ctx, provider, req)
}

// Version is the provider's, untimed: only Mount calls are timed.
func (mp *meteredProviders) Version(ctx context.Context, provider string) (*v1alpha1.VersionResponse, error) {
	return mp.p.Version(ctx, provider)
}

// providerSlot carries, in a publish's context, the provider the publish
// called, for the publish's metrics.
type providerSlot struct{ name atomic.Pointer[string] }

type providerSlotKey struct{}

// withProviderSlot returns ctx with an empty providerSlot.
func withProviderSlot(ctx context.Context) (context.Context, *providerSlot) {
	s := &providerSlot{}
	return context.WithValue(ctx, providerSlotKey{}, s), s
}

// called returns the provider the publish called, "" for none.
func (s *providerSlot) called() string {
	if p := s.name.Load(); p != nil {
		return *p
	}
	return ""
}
