package secretobjects

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver"
)

func TestNodeManager(t *testing.T) {
	if got := nodeManager("node-1"); got != "keymount-node-node-1" {
		t.Errorf("nodeManager = %q", got)
	}
	long := strings.Repeat("n", 253) // the longest node name
	got := nodeManager(long)
	if len(got) > maxManagerLength || !strings.HasPrefix(got, "keymount-node-") {
		t.Errorf("nodeManager of a long name = %q (%d chars)", got, len(got))
	}
	if got == nodeManager(strings.Repeat("n", 252)+"m") {
		t.Error("two long node names share a field manager")
	}
	edge := strings.Repeat("n", maxManagerLength-len("keymount-node-"))
	if got := nodeManager(edge); got != "keymount-node-"+edge {
		t.Errorf("a name that just fits is hashed: %q", got)
	}
}

func TestSyncSkipsWhenNothingToSync(t *testing.T) {
	s := New(nil, nil, "node", "secrets-store.csi.k8s.io", nil) // any API call would panic
	withObjects := &secretsstorev1.SecretProviderClass{Spec: secretsstorev1.SecretProviderClassSpec{
		SecretObjects: []*secretsstorev1.SecretObject{{SecretName: "db", Data: data("a", "a")}},
	}}
	tests := []struct {
		name string
		o    *driver.Outcome
	}{
		{"no class", &driver.Outcome{First: true, Err: errors.New("class not found")}},
		{"class without secretObjects", &driver.Outcome{Class: &secretsstorev1.SecretProviderClass{}, DataDir: "/nonexistent"}},
		{"failed first publish", &driver.Outcome{Class: withObjects, First: true, Err: errors.New("provider down"), DataDir: "/nonexistent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := s.Sync(t.Context(), tt.o)
			if c != nil || err != nil {
				t.Errorf("Sync = %+v, %v; want nil, nil", c, err)
			}
		})
	}
}

func TestCondition(t *testing.T) {
	c, err := condition([]result{{secret: "a"}, {secret: "b"}})
	if err != nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonSynced || c.Type != secretsstorev1.ConditionSecretsSynced ||
		c.Message != `Secrets "a", "b" match the mounted files` || c.LastTransitionTime.IsZero() {
		t.Errorf("all synced: %+v, %v", c, err)
	}
	apiErr := errors.New("connection refused")
	c, err = condition([]result{
		{secret: "a"},
		{secret: "b", reason: ReasonNotManaged, message: "b is not ours"},
		{secret: "c", reason: ReasonSyncFailed, message: "c failed", err: apiErr},
	})
	if c.Status != metav1.ConditionFalse || c.Reason != ReasonNotManaged || c.Message != "b is not ours; c failed" {
		t.Errorf("failures: %+v", c)
	}
	if !errors.Is(err, apiErr) {
		t.Errorf("error = %v, want the API failure", err)
	}
	c, err = condition([]result{{secret: "a"}, {secret: "b", kept: "b keeps newer content"}})
	if err != nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonContentKept || c.Message != `b keeps newer content; Secrets "a" match the mounted files` {
		t.Errorf("kept: %+v, %v", c, err)
	}
	c, _ = condition([]result{{secret: "b", kept: "b keeps newer content"}, {secret: "c", reason: ReasonSyncFailed, message: "c failed"}})
	if c.Status != metav1.ConditionFalse || c.Reason != ReasonSyncFailed || c.Message != "c failed" {
		t.Errorf("kept and failed: %+v", c)
	}
	c, _ = condition([]result{{secret: "x", reason: ReasonSyncFailed, message: strings.Repeat("é", maxMessage)}})
	if len(c.Message) > maxMessage || !strings.HasSuffix(c.Message, "...") {
		t.Errorf("long message is %d bytes", len(c.Message))
	}
}

func TestAnnounce(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	s := New(nil, nil, "node", "secrets-store.csi.k8s.io", rec)
	o := &driver.Outcome{PodName: "p", PodNamespace: "ns", PodUID: "uid", Class: &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Name: "spc"}}}
	claimed := failure("db", ReasonClaimedByOtherClass, "claimed by other")
	transient := failure("db", ReasonSyncFailed, "cannot write")
	transient.err = errors.New("timeout")

	s.announce(o, claimed)
	s.announce(o, claimed)                                      // the same lasting problem: no second event
	s.announce(o, failure("db", ReasonTypeMismatch, "types"))   // another problem
	s.announce(o, transient)                                    // API failures are always told
	s.announce(o, transient)                                    //
	s.announce(o, result{secret: "db"})                         // resolved, nothing changed: no event
	s.announce(o, claimed)                                      // back again: told again
	s.announce(o, result{secret: "db", created: true})          // created: the pod status says it, no event (no API write)
	s.announce(o, result{secret: "db", changed: []string{"k"}}) //
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	want := []string{
		"Warning SecretSyncFailed claimed by other",
		"Warning SecretSyncFailed types",
		"Warning SecretSyncFailed cannot write",
		"Warning SecretSyncFailed cannot write",
		"Warning SecretSyncFailed claimed by other",
		`Normal SecretSynced Secret "db" updated from class "spc": k changed`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ref := podReference(o)
	if *ref != (corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "p", UID: "uid"}) {
		t.Errorf("pod reference = %+v", ref)
	}
}
