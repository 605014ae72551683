//go:build integration

package secretobjects

import (
	"strings"
	"testing"

	"github.com/keymount/keymount/internal/tlsbundle/tlsbundletest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

func sharedObject() *secretsstorev1.SecretObject {
	return &secretsstorev1.SecretObject{SecretName: "shared", Type: "Opaque", Data: data("token", "token")}
}

func testClaims(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	alpha := cl.class(t, ns, "alpha", sharedObject())
	beta := cl.class(t, ns, "beta", sharedObject())
	gamma := cl.class(t, ns, "gamma", sharedObject())
	podA := cl.pod(t, ns, "a", "node-a", "alpha")
	podB := cl.pod(t, ns, "b", "node-a", "beta")
	podG := cl.pod(t, ns, "g", "node-a", "gamma")
	volA := newVolume(t, map[string]string{"token": "from-alpha"})
	volB := newVolume(t, map[string]string{"token": "from-beta"})
	volG := newVolume(t, map[string]string{"token": "from-gamma"})
	n := cl.node("node-a", nil)
	n.sync(t, outcome(podA, alpha, volA))
	n.writes.take()
	n.events.take()
	before := cl.secret(t, ns, "shared")

	// beta is second: no write, a condition naming both classes, one event.
	for range 3 {
		c := n.sync(t, outcome(podB, beta, volB))
		checkCondition(t, c, metav1.ConditionFalse, ReasonClaimedByOtherClass, `Secret "shared"`, `class "alpha"`, `class "beta"`)
	}
	checkWrites(t, n, 0)
	events := n.events.take()
	if len(events) != 1 || !strings.HasPrefix(events[0], podPrefix(podB)+"Warning SecretSyncFailed ") {
		t.Errorf("events = %q, want one Warning on pod b", events)
	}
	// No flapping: alpha keeps it and finds nothing to do.
	checkCondition(t, n.sync(t, outcome(podA, alpha, volA)), metav1.ConditionTrue, ReasonSynced)
	checkWrites(t, n, 0)
	if after := cl.secret(t, ns, "shared"); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the Secret was written (resourceVersion %s → %s)", before.ResourceVersion, after.ResourceVersion)
	}

	// alpha is deleted: its claim goes, beta takes the Secret over.
	if err := cl.admin.Delete(t.Context(), alpha); err != nil {
		t.Fatal(err)
	}
	checkCondition(t, n.sync(t, outcome(podB, beta, volB)), metav1.ConditionTrue, ReasonSynced)
	s := cl.secret(t, ns, "shared")
	if s.Annotations[ClassAnnotation] != "beta" || string(s.Data["token"]) != "from-beta" {
		t.Errorf("after the takeover: class %q, token %q", s.Annotations[ClassAnnotation], s.Data["token"])
	}
	n.events.take()
	checkCondition(t, n.sync(t, outcome(podG, gamma, volG)), metav1.ConditionFalse, ReasonClaimedByOtherClass, `class "beta"`, `class "gamma"`)

	// beta drops the Secret: gamma takes it over.
	beta.Spec.SecretObjects = []*secretsstorev1.SecretObject{{SecretName: "beta-own", Data: data("token", "token")}}
	if err := cl.admin.Update(t.Context(), beta); err != nil {
		t.Fatal(err)
	}
	checkCondition(t, n.sync(t, outcome(podG, gamma, volG)), metav1.ConditionTrue, ReasonSynced)
	if s := cl.secret(t, ns, "shared"); s.Annotations[ClassAnnotation] != "gamma" {
		t.Errorf("after the second takeover: class %q", s.Annotations[ClassAnnotation])
	}
}

// testUnmanaged reads through the node's cache, which never holds a Secret
// without the managed label: the Syncer has to look live.
func testUnmanaged(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	existing := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Data:       map[string][]byte{"password": []byte("made-by-hand")},
	}
	if err := cl.admin.Create(t.Context(), existing); err != nil {
		t.Fatal(err)
	}
	spc := dbClass(t, cl, ns)
	pod := cl.pod(t, ns, "app", "node-a", "db")
	vol := newVolume(t, map[string]string{"db/password": "pw-1", "user": "admin"})
	n := cl.node("node-a", cl.nodeCache(t, "node-a"))

	for range 2 {
		c := n.sync(t, outcome(pod, spc, vol))
		checkCondition(t, c, metav1.ConditionFalse, ReasonNotManaged, `Secret "db"`, ManagedLabel+"=true", "delete the Secret")
	}
	checkWrites(t, n, 0)
	if events := n.events.take(); len(events) != 1 {
		t.Errorf("events = %q, want one", events)
	}
	s := cl.secret(t, ns, "db")
	if s.ResourceVersion != existing.ResourceVersion || string(s.Data["password"]) != "made-by-hand" || len(s.OwnerReferences) != 0 {
		t.Errorf("the Secret was changed: %+v", s.ObjectMeta)
	}
}

// testAdoptUpstream: the upstream driver labels the Secrets it creates like
// keymount does and has no class annotation; keymount takes them over.
func testAdoptUpstream(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	legacy := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Labels: map[string]string{ManagedLabel: "true"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte("old")},
	}
	if err := cl.admin.Create(t.Context(), legacy); err != nil {
		t.Fatal(err)
	}
	spc := dbClass(t, cl, ns)
	pod := cl.pod(t, ns, "app", "node-a", "db")
	n := cl.node("node-a", nil)
	vol := newVolume(t, map[string]string{"db/password": "new", "user": "admin"})
	checkCondition(t, n.sync(t, outcome(pod, spc, vol)), metav1.ConditionTrue, ReasonSynced)
	s := cl.secret(t, ns, "db")
	if string(s.Data["password"]) != "new" || s.Annotations[ClassAnnotation] != "db" {
		t.Errorf("not adopted: password %q, class %q", s.Data["password"], s.Annotations[ClassAnnotation])
	}
	checkEvents(t, n, podPrefix(pod)+`Normal SecretSynced Secret "db" updated from class "db": password, username changed`)
}

func testTypeMismatch(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	existing := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{ManagedLabel: "true"}},
		Type:       corev1.SecretTypeOpaque,
	}
	if err := cl.admin.Create(t.Context(), existing); err != nil {
		t.Fatal(err)
	}
	spc := cl.class(t, ns, "web", &secretsstorev1.SecretObject{
		SecretName: "web", Type: "kubernetes.io/tls", Data: data("web.pem", "tls.crt", "web.pem", "tls.key"),
	})
	pod := cl.pod(t, ns, "app", "node-a", "web")
	c := tlsbundletest.NewChain(t)
	vol := newVolume(t, map[string]string{"web.pem": string(append(c.CertsPEM(), c.PKCS8PEM(t)...))})
	n := cl.node("node-a", nil)
	checkCondition(t, n.sync(t, outcome(pod, spc, vol)), metav1.ConditionFalse, ReasonTypeMismatch,
		`Secret "web" has type "Opaque"`, `"kubernetes.io/tls"`, "delete the Secret")
	checkWrites(t, n, 0)
}
