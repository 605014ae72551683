package harness

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGenerationsNext: the first generation has every object at version
// 1; a later one keeps what change says is unchanged and moves the rest
// to the next version with new content.
func TestGenerationsNext(t *testing.T) {
	h := NewGenerations("a", "d/b")
	content := func(name string, v int) string { return name + "@" + strconv.Itoa(v) }
	g1 := h.Next(nil, content)
	want := Generation{Versions: map[string]string{"a": "1", "d/b": "1"}, Contents: map[string]string{"a": "a@1", "d/b": "d/b@1"}}
	if d := cmp.Diff(want, g1); d != "" {
		t.Errorf("first generation (-want +got):\n%s", d)
	}
	g2 := h.Next(func(name string) bool { return name == "d/b" }, content)
	want = Generation{Versions: map[string]string{"a": "1", "d/b": "2"}, Contents: map[string]string{"a": "a@1", "d/b": "d/b@2"}}
	if d := cmp.Diff(want, g2); d != "" {
		t.Errorf("second generation (-want +got):\n%s", d)
	}
	h.Next(func(string) bool { return true }, content)
	if h.Len() != 3 || len(h.since(3)) != 2 || len(h.since(1)) != 3 {
		t.Errorf("len %d, since(3) %d, since(1) %d; want 3, 2, 3", h.Len(), len(h.since(3)), len(h.since(1)))
	}
}

// TestSeesRefusesAScratchArea: a writable directory is not the volume.
func TestSeesRefusesAScratchArea(t *testing.T) {
	err := Sees(t.TempDir(), []string{"a"}, func() []Generation { return nil })
	if err == nil || !strings.Contains(err.Error(), "not a read-only tmpfs") {
		t.Errorf("a temporary directory: %v, want it refused as not a read-only tmpfs", err)
	}
}
