package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/provider/v1alpha1"
)

// DefaultProviderHealthInterval is how often the providers are checked
// (upstream's --provider-health-check-interval default).
const DefaultProviderHealthInterval = 2 * time.Minute

// providerVersionTimeout bounds one Version call of a check, as upstream's.
const providerVersionTimeout = 5 * time.Second

// providerHealth checks in the background, every interval, that each
// provider a mounted volume uses answers Version over its socket: Probe
// and /readyz are not ready while one does not. With checkAll (upstream's
// --provider-health-check) the providers the driver has called since it
// started are checked as well, and every failed check is logged, as
// upstream does; their health is reported in the metrics but only the
// providers of mounted volumes decide readiness.
//
// A provider that answers Version with an error status (Unimplemented, for
// one) answered: only a missing socket, a refused connection or no answer
// within providerVersionTimeout make it unhealthy. A successful Mount call
// marks its provider healthy at once (and reports it until the next round
// says otherwise).
type providerHealth struct {
	interval time.Duration
	// timeout bounds one Version call: providerVersionTimeout.
	timeout  time.Duration
	checkAll bool
	version  func(ctx context.Context, provider string) error
	used     func() ([]string, error)

	mu sync.Mutex
	// checked is set once the first round has finished.
	checked bool
	// state is the last result of each provider checked, nil for healthy.
	state map[string]error
	// inUse are the providers mounted volumes used at the last round.
	inUse []string
	// called are the providers called since start.
	called map[string]struct{}
}

// check runs one round: every provider of a mounted volume (and, with
// checkAll, every provider called since start) asked for its Version at
// once.
func (h *providerHealth) check(ctx context.Context) {
	used, err := h.used()
	if err != nil {
		klog.ErrorS(err, "listing the providers of mounted volumes for their health check")
	}
	h.mu.Lock()
	targets := slices.Clone(used)
	if h.checkAll {
		for p := range h.called {
			if !slices.Contains(targets, p) {
				targets = append(targets, p)
			}
		}
	}
	h.mu.Unlock()

	results := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, p := range targets {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, h.timeout)
			defer cancel()
			results[i] = answered(cctx, p, h.timeout, h.version(cctx, p))
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // stopping: no verdict from calls cut short
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	next := make(map[string]error, len(targets))
	for i, p := range targets {
		next[p] = results[i]
		h.logChange(p, results[i])
	}
	h.state, h.inUse, h.checked = next, used, true
}

// logChange logs a provider turning unhealthy or healthy again; with
// checkAll, every failed check, as upstream.
func (h *providerHealth) logChange(provider string, err error) {
	prev, known := h.state[provider]
	switch {
	case err != nil && (h.checkAll || !known || prev == nil):
		klog.ErrorS(err, "provider health check failed", "provider", provider)
	case err == nil && known && prev != nil:
		klog.InfoS("provider answers its health check again", "provider", provider)
	case err == nil && h.checkAll:
		klog.V(4).InfoS("provider health check passed", "provider", provider)
	}
}

// answered turns the result of a Version call into the provider's health:
// nil when it answered.
func answered(ctx context.Context, provider string, timeout time.Duration, err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented {
		return nil // it answered
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("provider %q does not answer Version within %s: %w", provider, timeout, err)
	}
	return fmt.Errorf("provider %q does not answer Version: %w", provider, err)
}

// unhealthyRecheck is how soon a round follows one that found a provider
// of a mounted volume unhealthy (at most interval): a provider restarting
// beside the driver, as in a rolling update of both, makes the driver
// not ready for seconds, not for a whole interval.
const unhealthyRecheck = 5 * time.Second

// run checks at once, then every interval until ctx ends; while a provider
// of a mounted volume is unhealthy, every unhealthyRecheck.
func (h *providerHealth) run(ctx context.Context) {
	for {
		h.check(ctx)
		wait := h.interval
		if h.notReady() != nil {
			wait = min(wait, unhealthyRecheck)
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// mounted records a successful Mount call of provider: it answers.
func (h *providerHealth) mounted(provider string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.called == nil {
		h.called = map[string]struct{}{}
	}
	h.called[provider] = struct{}{}
	if err, known := h.state[provider]; known && err != nil {
		klog.InfoS("provider answers again", "provider", provider)
	}
	if h.state == nil {
		h.state = map[string]error{}
	}
	h.state[provider] = nil
}

// notReady returns why the providers make the driver not ready: the first
// round has not finished, or a provider a mounted volume uses did not
// answer its last check (all of them named); nil when ready.
func (h *providerHealth) notReady() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.checked {
		return errors.New("the providers of mounted volumes are being checked")
	}
	var errs []string
	for _, p := range h.inUse {
		if err := h.state[p]; err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("a provider of mounted volumes cannot be reached: %s", strings.Join(errs, "; "))
}

// healthy returns the health of every provider checked in the last round.
func (h *providerHealth) healthy() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]bool, len(h.state))
	for p, err := range h.state {
		out[p] = err == nil
	}
	return out
}

// observedProviders is the driver's provider client, telling the health
// check of each successful Mount.
type observedProviders struct {
	ProviderClient
	h *providerHealth
}

func (o observedProviders) Mount(ctx context.Context, provider string, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	resp, err := o.ProviderClient.Mount(ctx, provider, req)
	if err == nil {
		o.h.mounted(provider)
	}
	return resp, err
}

// ProviderHealth returns the health of every provider the last background
// check asked: true when it answered Version. For the metrics.
func (d *Driver) ProviderHealth() map[string]bool {
	return d.health.healthy()
}
