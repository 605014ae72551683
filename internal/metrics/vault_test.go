package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestVaultOperationsFixed: every operation is exported from the start, at
// 0; an operation outside VaultOperations is not counted and adds no
// series.
func TestVaultOperationsFixed(t *testing.T) {
	m := NewVault()
	m.VaultRequest("GET", false)
	m.VaultRequest("GET", true)
	m.VaultRequest("PATCH", false)
	m.VaultRequest("secret/data/made-up", true)
	if n := testutil.CollectAndCount(m.requests); n != len(VaultOperations) {
		t.Errorf("%d request series, want %d", n, len(VaultOperations))
	}
	if n := testutil.CollectAndCount(m.failures); n != len(VaultOperations) {
		t.Errorf("%d failure series, want %d", n, len(VaultOperations))
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("GET")); got != 1 {
		t.Errorf("GET requests = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.failures.WithLabelValues("GET")); got != 1 {
		t.Errorf("GET failures = %v, want 1", got)
	}
}
