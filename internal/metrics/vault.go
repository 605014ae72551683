package metrics

import (
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Vault is the Vault provider's metrics: its requests to Vault by
// operation, and their failures. It implements the Vault provider's
// Observer.
type Vault struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	failures *prometheus.CounterVec
	reissues prometheus.Counter
}

// VaultOperations are the operations the Vault provider counts.
var VaultOperations = []string{"login", "renew-self", "revoke-self", "GET", "PUT", "POST", "metadata", "renew", "revoke"}

// NewVault returns the Vault provider's metrics on a registry of their own,
// with the Go and process collectors.
func NewVault() *Vault {
	m := &Vault{reg: newRegistry()}
	f := factory{reg: m.reg}
	m.requests = f.counterVec(prometheus.CounterOpts{
		Name: "keymount_vault_requests_total",
		Help: "Requests the provider sent to Vault, by operation: login, renew-self, revoke-self, GET/PUT/POST (an object's request), metadata (a KV v2 version check), renew (a lease), revoke (a lease of an unpublished volume, revokeOnUnpublish).",
	}, "operation")
	m.failures = f.counterVec(prometheus.CounterOpts{
		Name: "keymount_vault_request_failures_total",
		Help: "Requests to Vault that failed, by operation.",
	}, "operation")
	m.reissues = f.counter(prometheus.CounterOpts{
		Name: "keymount_vault_lease_reissues_total",
		Help: "Leased objects requested again because their lease, or the login they were issued under, ended or would end before it could be renewed past the margin.",
	})
	for _, op := range VaultOperations {
		m.requests.WithLabelValues(op)
		m.failures.WithLabelValues(op)
	}
	return m
}

// VaultRequest counts one request, or its failure. An operation other
// than VaultOperations is not counted, so that the operation label stays a
// fixed set.
func (m *Vault) VaultRequest(op string, failed bool) {
	if !slices.Contains(VaultOperations, op) {
		return
	}
	if failed {
		m.failures.WithLabelValues(op).Inc()
		return
	}
	m.requests.WithLabelValues(op).Inc()
}

// LeaseReissued counts one leased object requested again.
func (m *Vault) LeaseReissued() { m.reissues.Inc() }

// Handler serves the metrics in Prometheus' text format.
func (m *Vault) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
