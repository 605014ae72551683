//go:build integration

package secretobjects

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/internal/kube"
)

// answeredAt is outcome with the provider's answer at t.
func answeredAt(o *driver.Outcome, t time.Time) *driver.Outcome {
	o.LastRefresh = t
	return o
}

// refreshFailed is a refresh that failed: the files are the ones answered
// at t.
func refreshFailed(o *driver.Outcome, t time.Time) *driver.Outcome {
	o.LastRefresh, o.Changed, o.Err = t, false, errors.New("provider unavailable")
	return o
}

func checkPassword(t *testing.T, cl *cluster, ns, want string) {
	t.Helper()
	if got := string(cl.secret(t, ns, "db").Data["password"]); got != want {
		t.Errorf("password = %q, want %q", got, want)
	}
}

// testNoRollbackAcrossNodes: two nodes sync one Secret. Node A synced the
// newest answer; node B, whose refresh failed or whose provider answered
// from an older cache, does not write its older content over it, and says
// so in its condition; an answer settle later than A's is written; then A,
// its own refresh failing, keeps B's.
func testNoRollbackAcrossNodes(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	spc := dbClass(t, cl, ns)
	podA := cl.pod(t, ns, "a", "node-a", "db")
	podB := cl.pod(t, ns, "b", "node-b", "db")
	volA := newVolume(t, map[string]string{"db/password": "v2", "user": "admin"})
	volB := newVolume(t, map[string]string{"db/password": "v1", "user": "admin"})
	na, nb := cl.node("node-a", nil), cl.node("node-b", nil)
	tA := time.Now().Add(-30 * time.Minute).Round(0)

	checkCondition(t, na.sync(t, answeredAt(outcome(podA, spc, volA), tA)), metav1.ConditionTrue, ReasonSynced)
	na.writes.take()
	before := cl.secret(t, ns, "db")

	// B's refresh failed: its files are from an answer older than A's.
	c := nb.sync(t, refreshFailed(outcome(podB, spc, volB), tA.Add(-time.Minute)))
	checkCondition(t, c, metav1.ConditionTrue, ReasonContentKept, `Secret "db" keeps the content node "node-a" synced`,
		formatTime(tA), "newer than this volume's")
	checkPassword(t, cl, ns, "v2")
	checkWrites(t, nb, 2) // A's create handed to the apply managers, then its pod's owner reference only
	if s := cl.secret(t, ns, "db"); !cmp.Equal(secretOwners(s), sortedUIDs(podA.UID, podB.UID)) || s.Annotations[ContentTimeAnnotation] != before.Annotations[ContentTimeAnnotation] {
		t.Errorf("owners %v, content time %s → %s", secretOwners(s), before.Annotations[ContentTimeAnnotation], s.Annotations[ContentTimeAnnotation])
	}

	// B's provider answered after A's, from a cache that still had v1.
	c = nb.sync(t, answeredAt(outcome(podB, spc, volB), tA.Add(30*time.Second)))
	checkCondition(t, c, metav1.ConditionTrue, ReasonContentKept, "too close to tell which is newer", formatTime(tA.Add(DefaultSettle)))
	checkPassword(t, cl, ns, "v2")
	checkWrites(t, nb, 0)
	checkEvents(t, nb)

	// An answer settle later than A's is newer: B writes it.
	volB.write(t, map[string]string{"db/password": "v3", "user": "admin"})
	tB := tA.Add(DefaultSettle)
	checkCondition(t, nb.sync(t, answeredAt(outcome(podB, spc, volB), tB)), metav1.ConditionTrue, ReasonSynced)
	checkPassword(t, cl, ns, "v3")
	s := cl.secret(t, ns, "db")
	if s.Annotations[ContentNodeAnnotation] != "node-b" || s.Annotations[ContentTimeAnnotation] != formatTime(tB) {
		t.Errorf("content stamp = %s at %s, want node-b at %s", s.Annotations[ContentNodeAnnotation], s.Annotations[ContentTimeAnnotation], formatTime(tB))
	}
	checkEvents(t, nb, podPrefix(podB)+`Normal SecretSynced Secret "db" updated from class "db": password changed`)

	// A's next refresh fails: its v2 is older than B's v3.
	c = na.sync(t, refreshFailed(outcome(podA, spc, volA), tA))
	checkCondition(t, c, metav1.ConditionTrue, ReasonContentKept, `node "node-b"`)
	checkPassword(t, cl, ns, "v3")
	checkWrites(t, na, 0)
}

// hookClient runs hook once, before the first write of the kind it names.
type hookClient struct {
	kube.Client
	verb string // "create" or "apply"
	once sync.Once
	hook func()
}

func (c *hookClient) before(verb string) {
	if verb == c.verb {
		c.once.Do(c.hook)
	}
}

func (c *hookClient) Create(ctx context.Context, obj kube.Object, fieldManager string) error {
	c.before("create")
	return c.Client.Create(ctx, obj, fieldManager)
}

func (c *hookClient) Apply(ctx context.Context, obj kube.Object, config []byte, fieldManager string) error {
	c.before("apply")
	return c.Client.Apply(ctx, obj, config, fieldManager)
}

// testNoRollbackInRaces: node B writes between node A's read and A's
// write, first creating the Secret A was about to create, then changing
// the content A was about to replace. A's write fails (the Secret exists, or
// changed since A read it), A reads it again, finds B's content newer and
// keeps it.
func testNoRollbackInRaces(t *testing.T, cl *cluster) {
	t0 := time.Now().Add(-time.Hour).Round(0)
	for _, race := range []struct {
		name string
		verb string
		// before is what B has synced before A reads, if anything.
		before bool
	}{
		{"B creates the Secret A is creating", "create", false},
		{"B writes the Secret A is writing", "apply", true},
	} {
		t.Run(race.name, func(t *testing.T) {
			ns := cl.namespace(t)
			spc := dbClass(t, cl, ns)
			podA := cl.pod(t, ns, "a", "node-a", "db")
			podB := cl.pod(t, ns, "b", "node-b", "db")
			volA := newVolume(t, map[string]string{"db/password": "from-a", "user": "admin"})
			volB := newVolume(t, map[string]string{"db/password": "from-b", "user": "admin"})
			nb := cl.node("node-b", nil)
			tB := t0.Add(DefaultSettle + time.Second) // newer than A's answer
			if race.before {
				old := newVolume(t, map[string]string{"db/password": "old", "user": "admin"})
				nb.sync(t, answeredAt(outcome(podB, spc, old), t0.Add(-DefaultSettle)))
				tB = t0.Add(2 * DefaultSettle)
			}
			hook := &hookClient{Client: cl.api, verb: race.verb, hook: func() {
				nb.sync(t, answeredAt(outcome(podB, spc, volB), tB))
			}}
			na := cl.nodeAs(hook, "node-a", cl.api)

			c := na.sync(t, answeredAt(outcome(podA, spc, volA), t0))
			checkCondition(t, c, metav1.ConditionTrue, ReasonContentKept, `node "node-b"`)
			checkPassword(t, cl, ns, "from-b")
			if got := cl.secret(t, ns, "db"); !cmp.Equal(secretOwners(got), sortedUIDs(podA.UID, podB.UID)) {
				t.Errorf("owners = %v, want both pods", secretOwners(got))
			}
		})
	}
}
