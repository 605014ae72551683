package driver

import (
	"context"
	"fmt"

	"golang.org/x/sync/semaphore"
)

// slots bounds the provider calls in flight and the bytes of their
// responses: each call holds one of ProviderConcurrency slots and reserves
// the largest response it may receive (ProviderMaxRecvBytes) of
// ProviderInflightBytes, from before the call until its response has been
// written and dropped. The driver's memory therefore stays bounded however
// many publishes kubelet sends at once; callers beyond the bound wait their
// turn (within their own deadline).
type slots struct {
	calls   *semaphore.Weighted
	bytes   *semaphore.Weighted
	reserve int64
}

func newSlots(cfg Config) *slots {
	return &slots{
		calls:   semaphore.NewWeighted(int64(cfg.ProviderConcurrency)),
		bytes:   semaphore.NewWeighted(cfg.ProviderInflightBytes),
		reserve: cfg.ProviderMaxRecvBytes,
	}
}

// acquire waits for a slot; the returned func gives it back.
func (s *slots) acquire(ctx context.Context) (func(), error) {
	if err := s.calls.Acquire(ctx, 1); err != nil {
		return nil, fmt.Errorf("waiting for a provider call slot: %w", err)
	}
	if err := s.bytes.Acquire(ctx, s.reserve); err != nil {
		s.calls.Release(1)
		return nil, fmt.Errorf("waiting for provider response memory: %w", err)
	}
	return func() {
		s.bytes.Release(s.reserve)
		s.calls.Release(1)
	}, nil
}
