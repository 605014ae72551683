package push

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keymount/keymount/internal/vaultkv"
)

// Metric names, on keymount-controller's /metrics.
const (
	MetricWrites = "keymount_push_writes_total"
	MetricLeases = "keymount_vault_source_leases_total"
)

// Stores and results: every label comes from a fixed set, never from a
// path, a namespace or a name.
const (
	StoreVaultKV1 = "vault-kv1"
	StoreVaultKV2 = "vault-kv2"
	// PushSecrets' stores, by provider and object type.
	StoreAWSSecretsManager = "aws-secretsmanager"
	StoreAWSSSM            = "aws-ssmparameter"
	StoreVault             = "vault"
	StoreOther             = "other"

	ResultConflict = "conflict"
	ResultError    = "error"
	ResultRemoved  = "removed"

	LeaseRenewed = "renewed"
	LeaseIssued  = "issued"
)

// Metrics count pushes and the leases of dynamic Vault sources. A nil
// *Metrics counts nothing.
type Metrics struct {
	writes *prometheus.CounterVec
	leases *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg, every series at 0.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricWrites,
			Help: "Pushes of a Secret's data to a store, by store (vault-kv1, vault-kv2: SecretMirrors' Vault destinations; aws-secretsmanager, aws-ssmparameter, vault, other: PushSecrets' values) and result: created, updated, adopted (the value there was already the one to write), unchanged (no write), skipped (IfNotExists and a value there), conflict (a value keymount did not write, not replaced), error, removed (deletionPolicy Delete).",
		}, []string{"store", "result"}),
		leases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricLeases,
			Help: "Leases of dynamic Vault sources (SecretMirror source.type vault), by result: renewed (at a poll, no new credentials) or issued (new credentials: the first read, or the lease at its max TTL or gone).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.writes, m.leases} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, store := range []string{StoreVaultKV1, StoreVaultKV2} {
		for _, r := range []string{vaultkv.Created.String(), vaultkv.Updated.String(), vaultkv.Adopted.String(), vaultkv.Unchanged.String(), vaultkv.Skipped.String(), ResultConflict, ResultError} {
			m.writes.WithLabelValues(store, r)
		}
	}
	m.leases.WithLabelValues(LeaseRenewed)
	m.leases.WithLabelValues(LeaseIssued)
	return m, nil
}

// Pushed counts one push to store with result r, or its error (a conflict
// when conflict).
func (m *Metrics) Pushed(store string, r fmt.Stringer, err error, conflict bool) {
	if m == nil {
		return
	}
	label := r.String()
	switch {
	case conflict:
		label = ResultConflict
	case err != nil:
		label = ResultError
	}
	m.writes.WithLabelValues(store, label).Inc()
}

// pushSecretResults are the results of a PushSecret's value.
var pushSecretResults = []string{"created", "updated", "adopted", "unchanged", "skipped", ResultConflict, ResultError, ResultRemoved}

// InitPushSecrets exports the PushSecrets' series at 0.
func (m *Metrics) InitPushSecrets() {
	if m == nil {
		return
	}
	for _, store := range []string{StoreAWSSecretsManager, StoreAWSSSM, StoreVault, StoreOther} {
		for _, r := range pushSecretResults {
			m.writes.WithLabelValues(store, r)
		}
	}
}

// PushSecretResult counts one PushSecret value's result (a label of
// pushSecretResults) in store.
func (m *Metrics) PushSecretResult(store, result string) {
	if m != nil {
		m.writes.WithLabelValues(store, result).Inc()
	}
}

// PushSecretCall counts a push request the provider did not answer item by
// item.
func (m *Metrics) PushSecretCall(result string) {
	if m != nil {
		m.writes.WithLabelValues(StoreOther, result).Inc()
	}
}

// Lease counts one lease renewed or issued.
func (m *Metrics) Lease(result string) {
	if m != nil {
		m.leases.WithLabelValues(result).Inc()
	}
}

// Store is the store label of a KV engine version.
func Store(kvVersion int) string {
	if kvVersion == 2 {
		return StoreVaultKV2
	}
	return StoreVaultKV1
}
