//go:build integration

package secretmirror_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/keymount/keymount/tests/poll"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/secretmirror"
)

// TestSecretMirror runs SecretMirrors against a real API server: each
// subtest has its own namespaces.
func TestSecretMirror(t *testing.T) {
	f := startFixture(t)
	t.Run("copies into matching namespaces, new namespaces at once", f.testFanOut)
	t.Run("source change and hand edits", f.testInStep)
	t.Run("unowned Secret reported, not overwritten", f.testNotOwned)
	t.Run("deletePolicy delete", f.testDeletePolicyDelete)
	t.Run("deletePolicy retain", f.testDeletePolicyRetain)
	t.Run("namespace no longer matching", f.testNoLongerMatching)
	t.Run("source deleted", f.testSourceDeleted)
	t.Run("vault answered with Error", f.testVault)
	t.Run("v1alpha1 manifest", f.testV1alpha1)
	t.Run("adopts mirrors' own copy", f.testAdoptsMirrorsCopy)
	t.Run("two SecretMirrors, one copy name", f.testTwoMirrors)
}

// testFanOut: the source is copied into every namespace a regex matches
// (not the others, not its own), with its type, data, labels and
// annotations, keymount's marks and mirrors' annotations; the status is
// Active; a namespace created later gets its copy without waiting for the
// poll period.
func (f *fixture) testFanOut(t *testing.T) {
	f.namespace(t, "fan-src", "fan-a-1", "fan-a-2", "fan-b-1", "other-fan-x")
	f.source(t, "fan-src", "tls", "v1")
	f.mirror(t, "fan-src", "tls-mirror", "tls", "", `^fan-a-\d+$`, `^fan-b`)
	for _, ns := range []string{"fan-a-1", "fan-a-2", "fan-b-1"} {
		c := f.copyHolds(t, ns, "tls", "v1")
		if c.Type != corev1.SecretTypeOpaque || c.Labels["team"] != "a" || c.Annotations["note"] != "kept" {
			t.Errorf("%s: type %q labels %v annotations %v: want the source's", ns, c.Type, c.Labels, c.Annotations)
		}
		wantMarks := map[string]string{
			secretmirror.AnnotationOwnedBy: f.ns("fan-src") + "/tls-mirror", fanout.AnnotationOwner: f.ns("fan-src") + "/tls-mirror",
			secretmirror.AnnotationSourceType: "secret",
		}
		for k, v := range wantMarks {
			if c.Annotations[k] != v {
				t.Errorf("%s: annotation %s=%q, want %q", ns, k, c.Annotations[k], v)
			}
		}
		if c.Labels[fanout.LabelCopy] != secretmirror.Writer || c.Annotations[secretmirror.AnnotationParentVersion] == "" {
			t.Errorf("%s: label %s=%q parent-version %q", ns, fanout.LabelCopy, c.Labels[fanout.LabelCopy], c.Annotations[secretmirror.AnnotationParentVersion])
		}
		if _, ok := c.Annotations["reflector.v1.k8s.emberstack.com/reflection-allowed"]; ok {
			t.Errorf("%s: the copy carries reflector's annotation: it would become a reflection source", ns)
		}
	}
	m := f.status(t, "fan-src", "tls-mirror", mirrorsv1alpha2.MirrorStatusActive, "3 namespaces")
	if m.Status.LastSyncTime == nil || !slices.Contains(m.Finalizers, secretmirror.Finalizer) {
		t.Errorf("status %+v finalizers %v: want lastSyncTime and mirrors' finalizer", m.Status, m.Finalizers)
	}
	for _, ns := range []string{"other-fan-x", "fan-src"} {
		if s, err := f.secret(t.Context(), ns, "tls"); err != nil || (s != nil && ns != "fan-src") {
			t.Errorf("%s holds %v (err %v): it matches no regex", ns, s, err)
		}
	}
	f.event(t, "fan-src", "tls-mirror", secretmirror.EventMirrorSynced, "fan-src/tls")

	f.namespace(t, "fan-a-3")
	f.copyHolds(t, "fan-a-3", "tls", "v1")
}

// testInStep: a source change reaches every copy (pollPeriodSeconds is an
// hour: the source watch does it), and a copy edited by hand, or stripped
// of a key, is put back.
func (f *fixture) testInStep(t *testing.T) {
	f.namespace(t, "step-src", "step-1", "step-2")
	updated := map[string]string{"writer": secretmirror.Writer, "kind": "Secret", "result": "updated"}
	writer := map[string]string{"writer": secretmirror.Writer}
	updated0, propagated0 := f.metric(t, fanout.MetricCopiesWritten, updated), f.metric(t, fanout.MetricPropagation, writer)
	src := f.source(t, "step-src", "creds", "v1")
	f.mirror(t, "step-src", "creds", "creds", "", "^step-[0-9]$")
	f.copyHolds(t, "step-1", "creds", "v1")
	f.copyHolds(t, "step-2", "creds", "v1")

	src.Data = map[string][]byte{"k": []byte("v2"), "extra": []byte("x")}
	if err := f.c.Update(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	f.copyHolds(t, "step-1", "creds", "v2")
	c := f.copyHolds(t, "step-2", "creds", "v2")
	if string(c.Data["extra"]) != "x" {
		t.Errorf("step-2 data keys %v: the new key did not arrive", slices.Sorted(maps.Keys(c.Data)))
	}
	// Both copies updated, and the source's change timed to the last.
	f.waitMetric(t, fanout.MetricCopiesWritten, updated, updated0+2)
	f.waitMetric(t, fanout.MetricPropagation, writer, propagated0+1)

	c.Data["k"] = []byte("edited by hand")
	delete(c.Data, "extra")
	if err := f.c.Update(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the hand edit undone", func(ctx context.Context) (bool, error) {
		s, err := f.secret(ctx, "step-2", "creds")
		return s != nil && string(s.Data["k"]) == "v2" && string(s.Data["extra"]) == "x", err
	})
}

// testNotOwned: a same-named Secret keymount did not write is left as it
// is, reported in the status (Error, naming the namespace) and by an event;
// the other namespaces get their copy; once such a Secret is deleted the
// copy takes its place (without a poll period: pollPeriodSeconds is an
// hour); deleting the SecretMirror leaves the one still there.
func (f *fixture) testNotOwned(t *testing.T) {
	f.namespace(t, "own-src", "own-1", "own-2", "own-3")
	var theirs []*corev1.Secret
	for _, ns := range []string{"own-2", "own-3"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns(ns), Name: "db"}, Data: map[string][]byte{"k": []byte("theirs")}}
		if err := f.c.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		theirs = append(theirs, s)
	}
	f.source(t, "own-src", "db", "ours")
	f.mirror(t, "own-src", "db", "db", "", "^own-[0-9]$")
	f.copyHolds(t, "own-1", "db", "ours")
	f.status(t, "own-src", "db", mirrorsv1alpha2.MirrorStatusError, f.ns("own-2")+", "+f.ns("own-3"))
	f.event(t, "own-src", "db", fanout.ReasonCopyConflict, "own-2")
	for i, s := range theirs {
		got, err := f.secret(t.Context(), []string{"own-2", "own-3"}[i], "db")
		if err != nil || got == nil || string(got.Data["k"]) != "theirs" || got.ResourceVersion != s.ResourceVersion {
			t.Fatalf("%s/db = %v (err %v): want it untouched", s.Namespace, got, err)
		}
	}

	if err := f.c.Delete(t.Context(), theirs[1]); err != nil {
		t.Fatal(err)
	}
	f.copyHolds(t, "own-3", "db", "ours")
	f.status(t, "own-src", "db", mirrorsv1alpha2.MirrorStatusError, "namespaces "+f.ns("own-2")+" and")

	// Deleting the SecretMirror (deletePolicy delete) leaves theirs.
	if err := f.c.Delete(t.Context(), &mirrorsv1alpha2.SecretMirror{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns("own-src"), Name: "db"}}); err != nil {
		t.Fatal(err)
	}
	f.gone(t, "own-1", "db")
	f.gone(t, "own-3", "db")
	if got, err := f.secret(t.Context(), "own-2", "db"); err != nil || got == nil || string(got.Data["k"]) != "theirs" {
		t.Fatalf("own-2/db = %v (err %v) after the delete: want it untouched", got, err)
	}
}

// mirrorGone waits until the SecretMirror is deleted (its finalizer done).
func (f *fixture) mirrorGone(t *testing.T, ns, name string) {
	t.Helper()
	if err := f.c.Delete(t.Context(), &mirrorsv1alpha2.SecretMirror{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns(ns), Name: name}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "SecretMirror "+ns+"/"+name+" deleted", func(ctx context.Context) (bool, error) {
		err := f.c.Get(ctx, types.NamespacedName{Namespace: f.ns(ns), Name: name}, &mirrorsv1alpha2.SecretMirror{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// testDeletePolicyDelete: deleting the SecretMirror (no deletePolicy:
// mirrors' default, delete) removes its copies.
func (f *fixture) testDeletePolicyDelete(t *testing.T) {
	f.namespace(t, "del-src", "del-1", "del-2")
	f.source(t, "del-src", "pull", "v")
	f.mirror(t, "del-src", "pull", "pull", "", "^del-[0-9]$")
	f.copyHolds(t, "del-1", "pull", "v")
	f.copyHolds(t, "del-2", "pull", "v")
	f.mirrorGone(t, "del-src", "pull")
	f.gone(t, "del-1", "pull")
	f.gone(t, "del-2", "pull")
	if s, err := f.secret(t.Context(), "del-src", "pull"); err != nil || s == nil {
		t.Fatalf("the source is gone (%v, %v): only copies may be deleted", s, err)
	}
}

// testDeletePolicyRetain: with retain, the copies outlive the SecretMirror.
func (f *fixture) testDeletePolicyRetain(t *testing.T) {
	f.namespace(t, "ret-src", "ret-1")
	f.source(t, "ret-src", "pull", "v")
	f.mirror(t, "ret-src", "pull", "pull", mirrorsv1alpha2.DeletePolicyRetain, "^ret-1$")
	f.copyHolds(t, "ret-1", "pull", "v")
	f.mirrorGone(t, "ret-src", "pull")
	if s, err := f.secret(t.Context(), "ret-1", "pull"); err != nil || s == nil || string(s.Data["k"]) != "v" {
		t.Fatalf("ret-1/pull = %v (err %v): retain keeps it", s, err)
	}
}

// testNoLongerMatching: a changed destination removes the copies in the
// namespaces it no longer matches and writes the new ones.
func (f *fixture) testNoLongerMatching(t *testing.T) {
	f.namespace(t, "nlm-src", "nlm-a", "nlm-b")
	f.source(t, "nlm-src", "s", "v")
	m := f.mirror(t, "nlm-src", "s", "s", "", "^nlm-a$")
	f.copyHolds(t, "nlm-a", "s", "v")
	// A merge patch, as kubectl patch sends: an Update of the object read
	// here may race the controller's status write (a conflict).
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.Destination.Namespaces = []string{f.re("^nlm-b$")}
	if err := f.c.Patch(t.Context(), m, patch); err != nil {
		t.Fatal(err)
	}
	f.copyHolds(t, "nlm-b", "s", "v")
	f.gone(t, "nlm-a", "s")
	f.event(t, "nlm-src", "s", secretmirror.EventMirrorCopiesDeleted, "nlm-a")
}

// testSourceDeleted: without its source the SecretMirror is Pending
// (NoSecret, as mirrors reports it) and its copies go; a new source brings
// them back.
func (f *fixture) testSourceDeleted(t *testing.T) {
	f.namespace(t, "sd-src", "sd-1")
	src := f.source(t, "sd-src", "s", "v1")
	f.mirror(t, "sd-src", "s", "s", "", "^sd-1$")
	f.copyHolds(t, "sd-1", "s", "v1")
	if err := f.c.Delete(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	f.gone(t, "sd-1", "s")
	m := f.status(t, "sd-src", "s", mirrorsv1alpha2.MirrorStatusPending, "not found")
	f.event(t, "sd-src", "s", secretmirror.EventMirrorNoSecret, "sd-src/s not found")
	if m.Status.LastSyncTime == nil {
		t.Error("lastSyncTime dropped: it says when the copies were last current")
	}
	f.source(t, "sd-src", "s", "v2")
	f.copyHolds(t, "sd-1", "s", "v2")
	f.status(t, "sd-src", "s", mirrorsv1alpha2.MirrorStatusActive, "")
}

// testVault: mirrors' Vault destination (its README's manifest) is
// whose AppRole Secret is missing is an Error naming the destination's
// field and the Secret; so is a Vault source's; a login Secret of another
// namespace is refused before it is read is an Error naming the field and
// the Secret. Nothing is written. TestSecretMirrorVault reads a real Vault.
func (f *fixture) testVault(t *testing.T) {
	f.namespace(t, "vault-src", "vault-dst-1")
	f.source(t, "vault-src", "mysecret", "v")
	vault := &mirrorsv1alpha2.VaultSpec{Addr: "https://vault.example.com", Path: "/secret/data/myteam/mysecret",
		Auth: &mirrorsv1alpha2.VaultAuth{AppRole: &mirrorsv1alpha2.VaultAppRoleAuth{SecretRef: &corev1.SecretReference{Name: "vault-approle"}}}}
	to := &mirrorsv1alpha2.SecretMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns("vault-src"), Name: "to-vault"},
		Spec: mirrorsv1alpha2.SecretMirrorSpec{
			Source:      mirrorsv1alpha2.SecretMirrorSource{Name: "mysecret"},
			Destination: mirrorsv1alpha2.SecretMirrorDestination{Type: mirrorsv1alpha2.DestinationTypeVault, Vault: vault},
		},
	}
	from := &mirrorsv1alpha2.SecretMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns("vault-src"), Name: "from-vault"},
		Spec: mirrorsv1alpha2.SecretMirrorSpec{
			Source:      mirrorsv1alpha2.SecretMirrorSource{Name: "mysecret2", Type: mirrorsv1alpha2.SourceTypeVault, Vault: vault},
			Destination: mirrorsv1alpha2.SecretMirrorDestination{Namespaces: []string{f.re(`vault-dst-\d+`)}},
		},
	}
	elsewhere := &mirrorsv1alpha2.SecretMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns("vault-src"), Name: "borrowed-login"},
		Spec: mirrorsv1alpha2.SecretMirrorSpec{
			Source: mirrorsv1alpha2.SecretMirrorSource{Name: "mysecret"},
			Destination: mirrorsv1alpha2.SecretMirrorDestination{Type: mirrorsv1alpha2.DestinationTypeVault, Vault: &mirrorsv1alpha2.VaultSpec{
				Addr: vault.Addr, Path: vault.Path, Auth: &mirrorsv1alpha2.VaultAuth{Token: &mirrorsv1alpha2.VaultTokenAuth{
					SecretRef: &corev1.SecretReference{Namespace: "kube-system", Name: "vault-token"}}}}},
		},
	}
	for _, m := range []*mirrorsv1alpha2.SecretMirror{to, from, elsewhere} {
		if err := f.c.Create(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	toMissing := "spec.destination.vault.auth.approle.secretRef: Secret " + f.ns("vault-src") + "/vault-approle not found"
	f.status(t, "vault-src", to.Name, mirrorsv1alpha2.MirrorStatusError, toMissing)
	f.event(t, "vault-src", to.Name, secretmirror.EventMirrorVaultError, toMissing)
	missing := "spec.source.vault.auth.approle.secretRef: Secret " + f.ns("vault-src") + "/vault-approle not found"
	f.status(t, "vault-src", from.Name, mirrorsv1alpha2.MirrorStatusError, missing)
	f.event(t, "vault-src", from.Name, secretmirror.EventMirrorVaultError, missing)
	if s, err := f.secret(t.Context(), "vault-dst-1", "mysecret2"); err != nil || s != nil {
		t.Fatalf("vault-dst-1/mysecret2 = %v (err %v): a Vault source that cannot be read writes nothing", s, err)
	}
	borrowed := `spec.destination.vault.auth.token.secretRef.namespace "kube-system": a SecretMirror logs in only with a Secret of its own namespace`
	f.status(t, "vault-src", elsewhere.Name, mirrorsv1alpha2.MirrorStatusError, borrowed)
	f.event(t, "vault-src", elsewhere.Name, secretmirror.EventMirrorVaultError, borrowed)
	f.mirrorGone(t, "vault-src", "borrowed-login")
	f.mirrorGone(t, "vault-src", "to-vault")
	f.mirrorGone(t, "vault-src", "from-vault")
}

// testV1alpha1: a v1alpha1 manifest of mirrors (destination.namespaceRegex)
// is served: the copies are made, and the object reads back as v1alpha2.
func (f *fixture) testV1alpha1(t *testing.T) {
	f.namespace(t, "v1-src", "v1-dst-7")
	f.source(t, "v1-src", "old", "v")
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "mirrors.kts.studio/v1alpha1", "kind": "SecretMirror",
		"metadata": map[string]any{"namespace": f.ns("v1-src"), "name": "old"},
		"spec": map[string]any{
			"source": map[string]any{"name": "old"}, "destination": map[string]any{"namespaceRegex": f.re(`v1-dst-\d+`)},
			"pollPeriodSeconds": int64(3600),
		},
	}}
	if err := f.c.Create(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	f.copyHolds(t, "v1-dst-7", "old", "v")
	f.status(t, "v1-src", "old", mirrorsv1alpha2.MirrorStatusActive, "")
}

// testAdoptsMirrorsCopy: a Secret mirrors wrote for the same SecretMirror
// (owned-by names it) becomes keymount's copy: no conflict, so a cluster
// switches from mirrors to keymount in place.
func (f *fixture) testAdoptsMirrorsCopy(t *testing.T) {
	f.namespace(t, "adopt-src", "adopt-1")
	byMirrors := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns("adopt-1"), Name: "s",
		Annotations: map[string]string{secretmirror.AnnotationOwnedBy: f.ns("adopt-src") + "/s"}}, Data: map[string][]byte{"k": []byte("old")}}
	if err := f.c.Create(t.Context(), byMirrors); err != nil {
		t.Fatal(err)
	}
	f.source(t, "adopt-src", "s", "new")
	f.mirror(t, "adopt-src", "s", "s", "", "^adopt-1$")
	c := f.copyHolds(t, "adopt-1", "s", "new")
	if c.UID != byMirrors.UID || c.Labels[fanout.LabelCopy] != secretmirror.Writer {
		t.Errorf("uid %s label %q: want mirrors' Secret (uid %s) taken over and labelled", c.UID, c.Labels[fanout.LabelCopy], byMirrors.UID)
	}
	f.status(t, "adopt-src", "s", mirrorsv1alpha2.MirrorStatusActive, "1 namespaces")
}

// testTwoMirrors: a second SecretMirror whose copy would land on the
// first's is reported (Error, CopyConflict) and never takes it over; the
// first stays Active and its copy unchanged.
func (f *fixture) testTwoMirrors(t *testing.T) {
	f.namespace(t, "two-src", "two-1")
	f.source(t, "two-src", "s", "v")
	f.mirror(t, "two-src", "first", "s", "", "^two-1$")
	c := f.copyHolds(t, "two-1", "s", "v")
	f.mirror(t, "two-src", "second", "s", "", "^two-")
	f.status(t, "two-src", "second", mirrorsv1alpha2.MirrorStatusError, "two-1")
	f.event(t, "two-src", "second", fanout.ReasonCopyConflict, "two-src/first")
	f.status(t, "two-src", "first", mirrorsv1alpha2.MirrorStatusActive, "")
	got, err := f.secret(t.Context(), "two-1", "s")
	if err != nil || got == nil || got.Annotations[fanout.AnnotationOwner] != f.ns("two-src")+"/first" || got.ResourceVersion != c.ResourceVersion {
		t.Fatalf("two-1/s = %v (err %v): want the first's copy untouched", got, err)
	}
}
