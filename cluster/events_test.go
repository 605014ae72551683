package cluster

import (
	"testing"

	"github.com/keymount/keymount/driver/volume"
)

func TestVersionChanges(t *testing.T) {
	before := []volume.Object{{ID: "db", Version: "1"}, {ID: "api", Version: "7"}, {ID: "old", Version: "3"}}
	after := []volume.Object{{ID: "db", Version: "2"}, {ID: "api", Version: "7"}, {ID: "tls", Version: "1"}}
	if got, want := versionChanges(before, after), "db 1 → 2, tls (new) 1, old (removed)"; got != want {
		t.Errorf("versionChanges = %q, want %q", got, want)
	}
	if got, want := versionChanges(after, after), "3 objects, versions unchanged (the provider reports none that differ)"; got != want {
		t.Errorf("versionChanges unchanged = %q, want %q", got, want)
	}
	var many []volume.Object
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		many = append(many, volume.Object{ID: id, Version: "1"})
	}
	if got, want := versionChanges(nil, many), "a (new) 1, b (new) 1, c (new) 1, d (new) 1, e (new) 1, f (new) 1, g (new) 1, h (new) 1, i (new) 1, j (new) 1 and 2 more"; got != want {
		t.Errorf("versionChanges of 12 = %q, want %q", got, want)
	}
}
