package secretsync

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/synchash"
)

// withPolicies is spec("Opaque", "a", "k") with the policy annotations
// given (an empty value leaves one out).
func withPolicies(creation, deletion string) *ss1.SecretSync {
	ss := spec("Opaque", "a", "k")
	ss.Annotations = map[string]string{}
	if creation != "" {
		ss.Annotations[AnnotationCreationPolicy] = creation
	}
	if deletion != "" {
		ss.Annotations[AnnotationDeletionPolicy] = deletion
	}
	return ss
}

// TestPoliciesOf: the defaults are Owner and Retain; every valid
// combination reads as written; invalid values and External Secrets'
// refused combinations (Delete with Merge or None, Merge deletion with
// None) are errPolicy naming the annotation and the values to use.
func TestPoliciesOf(t *testing.T) {
	for _, tc := range []struct{ creation, deletion, wantC, wantD string }{
		{"", "", CreationOwner, DeletionRetain},
		{"Orphan", "", CreationOrphan, DeletionRetain},
		{"Merge", "Merge", CreationMerge, DeletionMerge},
		{"Merge", "Retain", CreationMerge, DeletionRetain},
		{"None", "", CreationNone, DeletionRetain},
		{"Owner", "Delete", CreationOwner, DeletionDelete},
		{"Orphan", "Delete", CreationOrphan, DeletionDelete},
		{"Owner", "Merge", CreationOwner, DeletionMerge},
		{" Orphan ", "Merge", CreationOrphan, DeletionMerge},
	} {
		p, err := policiesOf(withPolicies(tc.creation, tc.deletion))
		if err != nil {
			t.Errorf("%q/%q: %v", tc.creation, tc.deletion, err)
			continue
		}
		if p.creation != tc.wantC || p.deletion != tc.wantD {
			t.Errorf("%q/%q read as %+v, want %s/%s", tc.creation, tc.deletion, p, tc.wantC, tc.wantD)
		}
	}
	for _, tc := range []struct {
		creation, deletion string
		want               []string
	}{
		{"owner", "", []string{AnnotationCreationPolicy, `"owner"`, "Owner (the default), Orphan, Merge or None"}},
		{"", "Orphan", []string{AnnotationDeletionPolicy, `"Orphan"`, "Retain (the default), Delete or Merge"}},
		{"Merge", "Delete", []string{AnnotationDeletionPolicy + " Delete", AnnotationCreationPolicy + " Merge", "Owner or Orphan"}},
		{"None", "Delete", []string{AnnotationDeletionPolicy + " Delete", AnnotationCreationPolicy + " None"}},
		{"None", "Merge", []string{AnnotationDeletionPolicy + " Merge", "None", "Retain"}},
	} {
		_, err := policiesOf(withPolicies(tc.creation, tc.deletion))
		if !errors.Is(err, errPolicy) {
			t.Errorf("%q/%q: error %v, want errPolicy", tc.creation, tc.deletion, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q/%q: message %q lacks %q", tc.creation, tc.deletion, err, w)
			}
		}
	}
	ss := withPolicies("Orphan", "")
	ss.Spec.SecretObject.Annotations = map[string]string{AnnotationSecretSyncUID: "x"}
	if _, err := policiesOf(ss); !errors.Is(err, errPolicy) || !strings.Contains(err.Error(), AnnotationSecretSyncUID) {
		t.Errorf("spec annotation %s: error %v, want errPolicy naming it", AnnotationSecretSyncUID, err)
	}
}

// TestPolicyOwnership: Owner and Orphan write only a Secret carrying the
// SecretSync's owner reference or its UID in AnnotationSecretSyncUID (so
// neither takes over a Secret another created, nor one an earlier
// SecretSync of that name orphaned); Merge writes into any; each policy's
// own form is what ownedAsWanted accepts.
func TestPolicyOwnership(t *testing.T) {
	ss := spec("Opaque", "a", "k")
	yes := true
	byRef := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{UID: ss.UID, Controller: &yes}}}}
	byAnn := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationSecretSyncUID: string(ss.UID)}}}
	oldAnn := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationSecretSyncUID: "earlier-uid"}}}
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{UID: "eso-uid", Kind: "ExternalSecret"}}}}
	owner := policies{creation: CreationOwner}
	orphan := policies{creation: CreationOrphan}
	merge := policies{creation: CreationMerge}
	for _, tc := range []struct {
		name           string
		p              policies
		s              *corev1.Secret
		owns, asWanted bool
	}{
		{"Owner, owner reference", owner, byRef, true, true},
		{"Owner, orphaned by it", owner, byAnn, true, false},
		{"Owner, another's", owner, foreign, false, false},
		{"Owner, orphaned by an earlier SecretSync", owner, oldAnn, false, false},
		{"Orphan, annotation", orphan, byAnn, true, true},
		{"Orphan, its owner reference", orphan, byRef, true, false},
		{"Orphan, another's", orphan, foreign, false, false},
		{"Orphan, orphaned by an earlier SecretSync", orphan, oldAnn, false, false},
		{"Merge, another's", merge, foreign, true, true},
		{"Merge, its owner reference", merge, byRef, true, false},
	} {
		if got := tc.p.owns(ss, tc.s); got != tc.owns {
			t.Errorf("%s: owns %v, want %v", tc.name, got, tc.owns)
		}
		if got := tc.p.ownedAsWanted(ss, tc.s); got != tc.asWanted {
			t.Errorf("%s: ownedAsWanted %v, want %v", tc.name, got, tc.asWanted)
		}
	}
}

// TestPolicyHash: a policy other than the defaults changes syncHash (a
// changed annotation leaves the generation), the defaults written out
// leave it as without them.
func TestPolicyHash(t *testing.T) {
	h, err := synchash.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	class := &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{UID: "c1", Generation: 1}}
	sum := func(ss *ss1.SecretSync) string {
		c, err := desiredContent(ss, files("a", "v1"))
		if err != nil {
			t.Fatal(err)
		}
		return h.Sum(hashContent(ss, class, c.digested()))
	}
	base := sum(withPolicies("", ""))
	if got := sum(withPolicies("Owner", "Retain")); got != base {
		t.Errorf("the default policies written out changed the hash")
	}
	seen := map[string]string{base: "defaults"}
	for _, p := range [][2]string{{"Orphan", ""}, {"Merge", ""}, {"", "Delete"}, {"", "Merge"}, {"Orphan", "Merge"}} {
		got := sum(withPolicies(p[0], p[1]))
		if prev, ok := seen[got]; ok {
			t.Errorf("policies %v hash as %s", p, prev)
		}
		seen[got] = p[0] + "/" + p[1]
	}
}
