package bench_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestParseSyncs checks the reading of the controller's sync counter that
// the controller benchmark's rounds rest on.
func TestParseSyncs(t *testing.T) {
	text := `# HELP keymount_controller_syncs_total SecretSync syncs that called the provider, by result.
# TYPE keymount_controller_syncs_total counter
keymount_controller_syncs_total{result="created"} 10000
keymount_controller_syncs_total{result="unchanged"} 2.5e+04
keymount_controller_syncs_total{result="provider_error"} 3
keymount_controller_syncs_totally_other{result="created"} 7
workqueue_depth{controller="secretsync",name="secretsync",priority="0"} 0
`
	got, err := parseSyncs(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := syncCounts{"created": 10000, "unchanged": 25000, "provider_error": 3}
	if len(got) != len(want) {
		t.Fatalf("parseSyncs = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("parseSyncs[%q] = %v, want %v", k, got[k], v)
		}
	}
	if got.ok() != 35000 || got.failed() != 3 {
		t.Errorf("ok %v, failed %v; want 35000 and 3", got.ok(), got.failed())
	}
	if _, err := parseSyncs(strings.NewReader(`keymount_controller_syncs_total{result="created"} many` + "\n")); err == nil {
		t.Error("parseSyncs accepted a value that is not a number")
	}
}

// TestCPUSeconds checks that the CPU time read from /proc/<pid>/stat grows
// while this process computes.
func TestCPUSeconds(t *testing.T) {
	start, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if start < 0 {
		t.Fatalf("cpuSeconds = %v, want >= 0", start)
	}
	x := uint64(1)
	err = wait.PollUntilContextTimeout(t.Context(), time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for i := range 1_000_000 {
			x = x*6364136223846793005 + uint64(i)
		}
		now, err := cpuSeconds(os.Getpid())
		return now > start, err
	})
	if err != nil {
		t.Fatalf("the CPU time did not grow from %v while computing (%d): %v", start, x, err)
	}
	if _, err := cpuSeconds(-1); err == nil {
		t.Error("cpuSeconds(-1) read a process that does not exist")
	}
}
