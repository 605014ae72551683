package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// providerHealthDesc is keymount_provider_healthy: one series per provider
// the driver's background health check asked, by its provider label (every
// provider whose socket was never found in one UnknownProvider series).
var providerHealthDesc = prometheus.NewDesc("keymount_provider_healthy", providerHealthHelp, []string{labelProvider}, nil)

const providerHealthHelp = "Whether the provider answered its last health check (a Version call over its socket): 1 yes, 0 no; " +
	"one series per provider that a mounted volume uses (with --provider-health-check, also per provider called since start); " +
	"every provider whose socket the driver never found is one series, provider=\"" + UnknownProvider + "\", 1 only when all of them answered."

// providerHealthCollector reports what the function WatchProviderHealth
// gave returns, on every scrape.
type providerHealthCollector struct {
	health atomic.Pointer[func() map[string]bool]
	// providers bounds the provider label (the Metrics' own).
	providers *ProviderLabels
}

func (c *providerHealthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- providerHealthDesc }

func (c *providerHealthCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.health.Load()
	if f == nil {
		return
	}
	byLabel := map[string]bool{}
	for provider, healthy := range (*f)() {
		label := c.providers.Label(provider)
		if prev, ok := byLabel[label]; ok {
			healthy = healthy && prev // one series for all unknown: healthy when all are
		}
		byLabel[label] = healthy
	}
	for label, healthy := range byLabel {
		v := 0.0
		if healthy {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(providerHealthDesc, prometheus.GaugeValue, v, label)
	}
}

// WatchProviderHealth makes keymount_provider_healthy report what health
// returns: the health of each provider checked (driver.Driver.ProviderHealth).
// It is called on every scrape.
func (m *Metrics) WatchProviderHealth(health func() map[string]bool) {
	m.providerHealth.health.Store(&health)
}
