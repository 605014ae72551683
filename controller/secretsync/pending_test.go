package secretsync

import (
	"testing"
	"time"
)

// TestPendingStatuses: a reconcile waits while the cache shows an older
// status than the one written, and not once it shows it or pendingFor has
// passed; nothing is kept after that.
func TestPendingStatuses(t *testing.T) {
	p := newPendingStatuses()
	t0 := time.Unix(1_700_000_000, 0)
	if p.behind("a", "", t0) {
		t.Fatal("behind with nothing written")
	}
	p.wrote("a", "h1", t0)
	if !p.behind("a", "", t0.Add(time.Second)) {
		t.Error("a cache without the written status is not behind")
	}
	if !p.behind("a", "h0", t0.Add(time.Second)) {
		t.Error("a cache with an older hash is not behind")
	}
	if p.behind("b", "", t0) {
		t.Error("another SecretSync is behind")
	}
	if p.behind("a", "h1", t0.Add(2*time.Second)) || p.len() != 0 {
		t.Errorf("the cache caught up, but still behind (%d kept)", p.len())
	}
	p.wrote("a", "h2", t0)
	if p.behind("a", "h1", t0.Add(pendingFor)) || p.len() != 0 {
		t.Errorf("past pendingFor, still behind (%d kept)", p.len())
	}
	p.wrote("c", "h", t0)
	p.forget("c")
	if p.behind("c", "", t0) || p.len() != 0 {
		t.Error("a forgotten SecretSync is behind")
	}
}
