package e2e

import (
	"slices"
	"sync"
)

// usedSecrets is every secret value the suite has used so far: object
// contents of the local provider, the service account tokens it minted for
// publishes, nodePublishSecretRef data, the values it stored in moto and the
// data of the Secrets it read back. TestMain scans every log the suite wrote
// for them once the tests are done (CVE-2023-2878: tokens in logs).
var usedSecrets secretRegistry

// secretValue is a value no log may hold and the label that names it in
// reports: a log hit prints the label, never the value.
type secretValue struct {
	label, value string
}

// secretRegistry is a set of secret values, safe for concurrent use.
type secretRegistry struct {
	mu     sync.Mutex
	seen   map[string]bool
	values []secretValue
}

// add records value under label; a value already recorded keeps its first
// label.
func (r *secretRegistry) add(label, value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[value] {
		return
	}
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	r.seen[value] = true
	r.values = append(r.values, secretValue{label: label, value: value})
}

// list returns the recorded values in the order they were added.
func (r *secretRegistry) list() []secretValue {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.values)
}
