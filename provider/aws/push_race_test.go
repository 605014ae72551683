package aws_test

import (
	"sync"
	"testing"

	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/server"
)

// TestPushRacingWritersStagingLabel: writer A checks the version, puts its
// value, and before it moves AWSCURRENT writer B (another provider,
// from the same last_version) completes its push. A's move names the
// version it checked, which no longer holds AWSCURRENT: moto refuses it as
// AWS does, A reports a conflict and B's value stays current.
func TestPushRacingWritersStagingLabel(t *testing.T) {
	a := newPushEnv(t)
	b := newPushEnvAt(t, a.endpoint)
	v1 := a.push(t, item("app/db", "v1"))[0].Version

	var bRes []server.PushResult
	a.calls.before["UpdateSecretVersionStage"] = func() { bRes = b.push(t, item("app/db", "from-b", last(v1))) }
	aRes := a.push(t, item("app/db", "from-a", last(v1)))

	want(t, "B (first)", bRes[0], updated)
	want(t, "A (second)", aRes[0], conflicts, `"app/db"`, v1)
	if value, v := a.current(t, "app/db"); value != "from-b" || v != bRes[0].Version {
		t.Errorf("current %q at %s, want B's value at %s", value, v, bRes[0].Version)
	}
}

// TestPushRacingWriters: two writers push from the same last_version at
// once: exactly one updates, the other reports a conflict, and the
// winner's value is current, however their calls interleave.
func TestPushRacingWriters(t *testing.T) {
	a := newPushEnv(t)
	b := newPushEnvAt(t, a.endpoint)
	v1 := a.push(t, item("app/db", "v1"))[0].Version

	results := make([][]server.PushResult, 2)
	var wg sync.WaitGroup
	for i, e := range []*pushEnv{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.pusher.Push(t.Context(), &server.PushRequest{Attributes: e.attrs,
				Items: []server.PushItem{item("app/db", []string{"from-a", "from-b"}[i], last(v1))}})
			if err == nil && len(res) == 1 {
				results[i] = res
			}
		}()
	}
	wg.Wait()
	if results[0] == nil || results[1] == nil {
		t.Fatalf("a push failed as a whole: %v", results)
	}
	outcomes := []keymountv1.Outcome{results[0][0].Outcome, results[1][0].Outcome}
	winner := -1
	switch {
	case outcomes[0] == updated && outcomes[1] == conflicts:
		winner = 0
	case outcomes[1] == updated && outcomes[0] == conflicts:
		winner = 1
	default:
		t.Fatalf("outcomes %v (%q, %q): want one UPDATED and one CONFLICT", outcomes, results[0][0].Message, results[1][0].Message)
	}
	value, v := a.current(t, "app/db")
	if wantValue := []string{"from-a", "from-b"}[winner]; value != wantValue || v != results[winner][0].Version {
		t.Errorf("current %q at %s, want the winner's %q at %s", value, v, wantValue, results[winner][0].Version)
	}
}
