package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestProviderHealth: keymount_provider_healthy has no series before
// WatchProviderHealth, then one per provider the function reports, 1 for
// healthy and 0 for not, read again on every scrape (a provider no longer
// reported has no series).
func TestProviderHealth(t *testing.T) {
	m := newFound("aws", "local", "vault")
	const name = "keymount_provider_healthy"
	if n, err := testutil.GatherAndCount(m.Registry(), name); err != nil || n != 0 {
		t.Fatalf("before WatchProviderHealth: %d series (%v), want none", n, err)
	}
	health := map[string]bool{"aws": true, "vault": false}
	m.WatchProviderHealth(func() map[string]bool { return health })
	want := `
# HELP keymount_provider_healthy ` + providerHealthHelp + `
# TYPE keymount_provider_healthy gauge
keymount_provider_healthy{provider="aws"} 1
keymount_provider_healthy{provider="vault"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), name); err != nil {
		t.Error(err)
	}
	health = map[string]bool{"aws": false}
	want = `
# HELP keymount_provider_healthy ` + providerHealthHelp + `
# TYPE keymount_provider_healthy gauge
keymount_provider_healthy{provider="aws"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), name); err != nil {
		t.Errorf("after vault left and aws went down: %v", err)
	}
}
