package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// providerHealthDesc is keymount_provider_healthy: one series per provider
// the driver's background health check asked.
var providerHealthDesc = prometheus.NewDesc("keymount_provider_healthy", providerHealthHelp, []string{labelProvider}, nil)

const providerHealthHelp = "Whether the provider answered its last health check (a Version call over its socket): 1 yes, 0 no; " +
	"one series per provider that a mounted volume uses (with --provider-health-check, also per provider called since start)."

// providerHealthCollector reports what the function WatchProviderHealth
// gave returns, on every scrape.
type providerHealthCollector struct {
	health atomic.Pointer[func() map[string]bool]
}

func (c *providerHealthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- providerHealthDesc }

func (c *providerHealthCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.health.Load()
	if f == nil {
		return
	}
	for provider, healthy := range (*f)() {
		v := 0.0
		if healthy {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(providerHealthDesc, prometheus.GaugeValue, v, provider)
	}
}

// WatchProviderHealth makes keymount_provider_healthy report what health
// returns: the health of each provider checked (driver.Driver.ProviderHealth).
// It is called on every scrape.
func (m *Metrics) WatchProviderHealth(health func() map[string]bool) {
	m.providerHealth.health.Store(&health)
}
