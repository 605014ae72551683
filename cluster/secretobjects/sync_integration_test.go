//go:build integration

package secretobjects

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/poll"
)

// TestAgainstAPIServer runs the integration cases against one real
// kube-apiserver with etcd and the garbage collector, each case in its own
// namespace.
func TestAgainstAPIServer(t *testing.T) {
	cl := startCluster(t)
	cases := []struct {
		name string
		run  func(*testing.T, *cluster)
	}{
		{"creates an Opaque Secret", testCreateOpaque},
		{"updates the Secret when the data changes", testUpdate},
		{"writes nothing when nothing changed", testNoWriteWhenUnchanged},
		{"keeps other managers' fields", testOtherManagersSurvive},
		{"recreates the Secret after a failed refresh", testFailedRefresh},
		{"reports a missing object", testMissingObject},
		{"splits TLS from PEM and base64 PKCS#12", testTLS},
		{"first class keeps a Secret two classes claim", testClaims},
		{"refuses a Secret keymount did not create", testUnmanaged},
		{"adopts a Secret of the upstream driver", testAdoptUpstream},
		{"refuses to change a Secret's type", testTypeMismatch},
		{"owner references per node, garbage-collected", testOwnersPerNode},
		{"owned by the pods' owners, as upstream", testOwnedByPodsOwners},
		{"created with its owner: never orphaned", testCreateCarriesOwner},
		{"no node rolls content back", testNoRollbackAcrossNodes},
		{"no rollback when nodes race", testNoRollbackInRaces},
		{"needs only the permissions it documents", testLeastPrivilege},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, cl)
		})
	}
}

// dbClass is a class with one Opaque Secret "db" of two keys.
func dbClass(t *testing.T, cl *cluster, ns string) *secretsstorev1.SecretProviderClass {
	t.Helper()
	return cl.class(t, ns, "db", &secretsstorev1.SecretObject{
		SecretName: "db", Type: "Opaque",
		Labels:      map[string]string{"app": "db"},
		Annotations: map[string]string{"team": "payments"},
		Data:        data("db/password", "password", "user", "username"),
	})
}

func checkCondition(t *testing.T, c *metav1.Condition, status metav1.ConditionStatus, reason string, words ...string) {
	t.Helper()
	if c.Type != secretsstorev1.ConditionSecretsSynced || c.Status != status || c.Reason != reason {
		t.Fatalf("condition = %s %s %s: %s; want %s %s", c.Type, c.Status, c.Reason, c.Message, status, reason)
	}
	for _, w := range words {
		if !strings.Contains(c.Message, w) {
			t.Errorf("condition message %q lacks %q", c.Message, w)
		}
	}
}

func checkWrites(t *testing.T, n *testNode, want int) {
	t.Helper()
	if got := n.writes.take(); got != want {
		t.Errorf("%s made %d writes, want %d", n.name, got, want)
	}
}

func checkEvents(t *testing.T, n *testNode, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, n.events.take()); diff != "" {
		t.Errorf("events on %s (-want +got):\n%s", n.name, diff)
	}
}

func testCreateOpaque(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	spc := dbClass(t, cl, ns)
	pod := cl.pod(t, ns, "app", "node-a", "db")
	vol := newVolume(t, map[string]string{"db/password": "pw-1", "user": "admin", "unrelated": "x"})
	n := cl.node("node-a", nil)

	o := outcome(pod, spc, vol)
	checkCondition(t, n.sync(t, o), metav1.ConditionTrue, ReasonSynced, `"db"`)

	s := cl.secret(t, ns, "db")
	if s.Type != corev1.SecretTypeOpaque {
		t.Errorf("type = %q", s.Type)
	}
	if diff := cmp.Diff(map[string][]byte{"password": []byte("pw-1"), "username": []byte("admin")}, s.Data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"app": "db", ManagedLabel: "true"}, s.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	wantAnnotations := map[string]string{
		"team": "payments", ClassAnnotation: "db",
		ContentNodeAnnotation: "node-a", ContentTimeAnnotation: o.LastRefresh.UTC().Format(time.RFC3339Nano),
	}
	if diff := cmp.Diff(wantAnnotations, s.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	// A pod without owners owns the Secret itself; no controller flag, as
	// upstream.
	wantOwners := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "app", UID: pod.UID}}
	if diff := cmp.Diff(wantOwners, s.OwnerReferences); diff != "" {
		t.Errorf("owner references (-want +got):\n%s", diff)
	}
	var managers []string
	for _, e := range s.ManagedFields {
		managers = append(managers, e.Manager+"/"+string(e.Operation))
	}
	// The create's entry; the first write after it hands its fields to
	// the apply managers (testCreateCarriesOwner).
	if diff := cmp.Diff([]string{"keymount/Update"}, managers); diff != "" {
		t.Errorf("field managers (-want +got):\n%s", diff)
	}
	checkWrites(t, n, 1) // the create alone
	checkEvents(t, n)    // the pod status says it: no event, no second write
}

func testUpdate(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	spc := dbClass(t, cl, ns)
	pod := cl.pod(t, ns, "app", "node-a", "db")
	vol := newVolume(t, map[string]string{"db/password": "pw-1", "user": "admin"})
	n := cl.node("node-a", nil)
	n.sync(t, outcome(pod, spc, vol))
	n.writes.take()
	n.events.take()

	vol.write(t, map[string]string{"db/password": "pw-2", "user": "admin"})
	checkCondition(t, n.sync(t, outcome(pod, spc, vol)), metav1.ConditionTrue, ReasonSynced)

	if got := string(cl.secret(t, ns, "db").Data["password"]); got != "pw-2" {
		t.Errorf("password = %q, want the new value", got)
	}
	checkWrites(t, n, 2) // the create's fields handed to the apply managers, then the content; the owners did not change
	checkEvents(t, n, podPrefix(pod)+`Normal SecretSynced Secret "db" updated from class "db": password changed`)
}

// testNoWriteWhenUnchanged reads through the node's real cache, as the driver
// does.
func testNoWriteWhenUnchanged(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	spc := dbClass(t, cl, ns)
	pod := cl.pod(t, ns, "app", "node-a", "db")
	vol := newVolume(t, map[string]string{"db/password": "pw-1", "user": "admin"})
	nodeCache := cl.nodeCache(t, "node-a")
	n := cl.node("node-a", nodeCache)
	observed := &writeCounts{}
	n.syncer.ObserveWrites(observed)
	n.sync(t, outcome(pod, spc, vol))
	checkWrites(t, n, 1)
	observed.check(t, 1, 0)
	n.events.take()

	live := cl.secret(t, ns, "db")
	poll.Until(t, "the cache to hold the Secret and the pod", func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		var p corev1.Pod
		err := errors.Join(nodeCache.Get(ctx, types.NamespacedName{Namespace: live.Namespace, Name: live.Name}, &s),
			nodeCache.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, &p))
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return s.ResourceVersion == live.ResourceVersion, err
	})
	for range 3 {
		checkCondition(t, n.sync(t, outcome(pod, spc, vol)), metav1.ConditionTrue, ReasonSynced)
	}
	checkWrites(t, n, 0)
	observed.check(t, 1, 3)
	checkEvents(t, n)
	if rv := cl.secret(t, ns, "db").ResourceVersion; rv != live.ResourceVersion {
		t.Errorf("resourceVersion %s → %s: the Secret was written", live.ResourceVersion, rv)
	}
}

// writeCounts is a WriteObserver that counts, and remembers the providers
// it heard of.
type writeCounts struct {
	written, unchanged atomic.Int32
	mu                 sync.Mutex
	providers          []string
}

func (w *writeCounts) SecretSynced(provider string, written bool, took time.Duration) {
	if written {
		w.written.Add(1)
	} else {
		w.unchanged.Add(1)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if took > 0 {
		w.providers = append(w.providers, provider)
	}
}

func (w *writeCounts) check(t *testing.T, written, unchanged int32) {
	t.Helper()
	if w.written.Load() != written || w.unchanged.Load() != unchanged {
		t.Errorf("observed %d Secrets written and %d unchanged, want %d and %d",
			w.written.Load(), w.unchanged.Load(), written, unchanged)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.providers {
		if p == "" {
			t.Errorf("a Secret synced was heard without its class's provider")
		}
	}
	if len(w.providers) != int(written+unchanged) {
		t.Errorf("%d of %d Secrets synced were heard with a duration", len(w.providers), written+unchanged)
	}
}

func testOtherManagersSurvive(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	spc := dbClass(t, cl, ns)
	pod := cl.pod(t, ns, "app", "node-a", "db")
	vol := newVolume(t, map[string]string{"db/password": "pw-1", "user": "admin"})
	n := cl.node("node-a", nil)
	n.sync(t, outcome(pod, spc, vol))

	// Another tool applies its own label, annotation, data key and owner.
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	if err := cl.admin.Create(t.Context(), owner); err != nil {
		t.Fatal(err)
	}
	other := corev1ac.Secret("db", ns).
		WithLabels(map[string]string{"backup": "daily"}).
		WithAnnotations(map[string]string{"example.com/note": "rotated by keymount"}).
		WithData(map[string][]byte{"extra": []byte("other tool")}).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("v1").WithKind("ConfigMap").WithName("owner").WithUID(owner.UID))
	if err := cl.admin.Apply(t.Context(), other, client.FieldOwner("other-tool")); err != nil {
		t.Fatal(err)
	}
	// And a person labels it by hand (an Update, not an apply).
	s := cl.secret(t, ns, "db")
	patch := client.MergeFrom(s.DeepCopy())
	s.Labels["edited-by"] = "hand"
	if err := cl.admin.Patch(t.Context(), s, patch); err != nil {
		t.Fatal(err)
	}

	// The class drops "username", a key keymount wrote: that alone is a
	// change, and the apply removes the key.
	spc.Spec.SecretObjects[0].Data = data("db/password", "password")
	if err := cl.admin.Update(t.Context(), spc); err != nil {
		t.Fatal(err)
	}
	n.writes.take()
	checkCondition(t, n.sync(t, outcome(pod, spc, vol)), metav1.ConditionTrue, ReasonSynced)
	checkWrites(t, n, 2) // the create's fields handed to the apply managers, then the apply
	if _, ok := cl.secret(t, ns, "db").Data["username"]; ok {
		t.Error("the key the class dropped is still there")
	}

	// The data changes.
	vol.write(t, map[string]string{"db/password": "pw-2", "user": "admin"})
	checkCondition(t, n.sync(t, outcome(pod, spc, vol)), metav1.ConditionTrue, ReasonSynced)
	checkWrites(t, n, 1)

	s = cl.secret(t, ns, "db")
	if diff := cmp.Diff(map[string][]byte{"password": []byte("pw-2"), "extra": []byte("other tool")}, s.Data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"app": "db", ManagedLabel: "true", "backup": "daily", "edited-by": "hand"}, s.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	delete(s.Annotations, ContentTimeAnnotation)
	delete(s.Annotations, ContentNodeAnnotation)
	if diff := cmp.Diff(map[string]string{"team": "payments", ClassAnnotation: "db", "example.com/note": "rotated by keymount"}, s.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sortedUIDs(owner.UID, pod.UID), secretOwners(s)); diff != "" {
		t.Errorf("owner references (-want +got):\n%s", diff)
	}
}

func testFailedRefresh(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	spc := dbClass(t, cl, ns)
	pod := cl.pod(t, ns, "app", "node-a", "db")
	vol := newVolume(t, map[string]string{"db/password": "pw-1", "user": "admin"})
	n := cl.node("node-a", nil)
	n.sync(t, outcome(pod, spc, vol))
	if err := cl.admin.Delete(t.Context(), cl.secret(t, ns, "db")); err != nil {
		t.Fatal(err)
	}

	o := outcome(pod, spc, vol)
	o.Changed, o.Err = false, errors.New("provider unavailable")
	checkCondition(t, n.sync(t, o), metav1.ConditionTrue, ReasonSynced)
	if got := string(cl.secret(t, ns, "db").Data["password"]); got != "pw-1" {
		t.Errorf("password = %q, want the kept value", got)
	}
}

func testMissingObject(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	spc := cl.class(t, ns, "db", &secretsstorev1.SecretObject{SecretName: "db", Data: data("db/passwd", "password")})
	pod := cl.pod(t, ns, "app", "node-a", "db")
	vol := newVolume(t, map[string]string{"db/password": "pw-secret-value", "user": "admin"})
	n := cl.node("node-a", nil)

	c, err := n.syncer.Sync(t.Context(), outcome(pod, spc, vol))
	if err != nil {
		t.Fatalf("Sync: %v (a class mistake is no API failure)", err)
	}
	checkCondition(t, c, metav1.ConditionFalse, ReasonSyncFailed, `object "db/passwd"`, "db/password, user")
	if strings.Contains(c.Message, "pw-secret-value") {
		t.Error("the condition shows file contents")
	}
	checkWrites(t, n, 0)
	checkEvents(t, n, podPrefix(pod)+"Warning SecretSyncFailed "+c.Message)
	var s corev1.Secret
	if err := cl.admin.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "db"}, &s); err == nil {
		t.Error("a Secret was created without its data")
	}
}
