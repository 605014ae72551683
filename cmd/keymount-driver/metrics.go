package main

import (
	"context"

	"github.com/keymount/keymount/cluster/secretobjects"
	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/internal/metrics"
)

// The driver's metrics hear the driver and the Secret sync's writes.
var (
	_ driver.Metrics              = (*metrics.Metrics)(nil)
	_ secretobjects.WriteObserver = (*metrics.Metrics)(nil)
)

// defaultMetricsAddr is upstream's default --metrics-addr.
const defaultMetricsAddr = ":8095"

// newMetrics returns the driver's metrics when --metrics-addr is set, and
// has deps report to them (provider calls timed); nil when it is empty.
// found tells which providers' sockets the provider client has found: only
// those are labelled by name.
func newMetrics(cfg *config, deps *driver.Deps, found func(provider string) bool) *metrics.Metrics {
	if cfg.metricsAddr == "" {
		return nil
	}
	m := metrics.New()
	m.ProvidersFound(found)
	deps.Metrics = m
	deps.Providers = driver.MeteredProviders(deps.Providers, m)
	return m
}

// serveEndpoints serves, each when its flag is set, the driver's /healthz
// and /readyz on --health-addr, and /metrics with the same /healthz and
// /readyz on --metrics-addr, until the returned func is called.
func serveEndpoints(ctx context.Context, cfg *config, m *metrics.Metrics, d *driver.Driver, checks []driver.HealthCheck) (func(), error) {
	var stops []func()
	stopAll := func() {
		for _, stop := range stops {
			stop()
		}
	}
	if cfg.healthAddr != "" {
		stop, err := serveHealth(ctx, cfg.healthAddr, d.HealthHandler(checks...))
		if err != nil {
			return nil, err
		}
		stops = append(stops, stop)
	}
	if m != nil {
		m.WatchWriteQueue(d.WriteQueue)
		m.WatchProviderHealth(d.ProviderHealth)
		stop, err := serveHTTP(ctx, "--metrics-addr", cfg.metricsAddr, "metrics", m.Handler(d.HealthHandler(checks...)))
		if err != nil {
			stopAll()
			return nil, err
		}
		stops = append(stops, stop)
	}
	return stopAll, nil
}
