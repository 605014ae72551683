package secretmirror

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
)

func secretMirror(spec mirrorsv1alpha2.SecretMirrorSpec) *mirrorsv1alpha2.SecretMirror {
	return &mirrorsv1alpha2.SecretMirror{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "pull"}, Spec: spec}
}

// TestParseSpecVaultDestination: a Vault destination is retain, as mirrors
// sets it, whatever deletePolicy says; one without a path is refused,
// naming the field.
func TestParseSpecVaultDestination(t *testing.T) {
	s, err := parseSpec(secretMirror(mirrorsv1alpha2.SecretMirrorSpec{
		Destination: mirrorsv1alpha2.SecretMirrorDestination{Type: mirrorsv1alpha2.DestinationTypeVault,
			Vault: &mirrorsv1alpha2.VaultSpec{Addr: "https://vault:8200", Path: "/secret/data/x"}},
		DeletePolicy: mirrorsv1alpha2.DeletePolicyDelete,
	}))
	if err != nil || !s.vaultDestination || s.deletePolicy != mirrorsv1alpha2.DeletePolicyRetain {
		t.Errorf("vault destination %+v, %v: want vault, retain (as mirrors sets it)", s, err)
	}
	_, err = parseSpec(secretMirror(mirrorsv1alpha2.SecretMirrorSpec{
		Destination: mirrorsv1alpha2.SecretMirrorDestination{Type: mirrorsv1alpha2.DestinationTypeVault,
			Vault: &mirrorsv1alpha2.VaultSpec{Addr: "https://vault:8200"}},
	}))
	if err == nil || !strings.Contains(err.Error(), "spec.destination.vault.path") {
		t.Errorf("vault destination without a path: %v, want an error naming spec.destination.vault.path", err)
	}
}

// TestParseSpecDefaults: mirrors' defaults (source.name the SecretMirror's
// name, 180 s, delete).
func TestParseSpecDefaults(t *testing.T) {
	s, err := parseSpec(secretMirror(mirrorsv1alpha2.SecretMirrorSpec{
		Destination: mirrorsv1alpha2.SecretMirrorDestination{Namespaces: []string{"a"}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if s.sourceName != "pull" || s.period != 180*time.Second || s.deletePolicy != mirrorsv1alpha2.DeletePolicyDelete || s.vaultSource || s.vaultDestination {
		t.Errorf("defaults %+v: want source pull, 3m, delete, not vault", s)
	}
	s, err = parseSpec(secretMirror(mirrorsv1alpha2.SecretMirrorSpec{
		Source: mirrorsv1alpha2.SecretMirrorSource{Name: "other"}, PollPeriodSeconds: 5,
		DeletePolicy: mirrorsv1alpha2.DeletePolicyRetain,
		Destination:  mirrorsv1alpha2.SecretMirrorDestination{Namespaces: []string{"a"}},
	}))
	if err != nil || s.sourceName != "other" || s.period != 5*time.Second || s.deletePolicy != mirrorsv1alpha2.DeletePolicyRetain {
		t.Errorf("explicit %+v, %v", s, err)
	}
	s, err = parseSpec(secretMirror(mirrorsv1alpha2.SecretMirrorSpec{
		Source:      mirrorsv1alpha2.SecretMirrorSource{Type: mirrorsv1alpha2.SourceTypeVault},
		Destination: mirrorsv1alpha2.SecretMirrorDestination{Namespaces: []string{"a"}},
	}))
	if err != nil || !s.vaultSource || s.vaultDestination || s.deletePolicy != mirrorsv1alpha2.DeletePolicyDelete || !s.match.matches("a") {
		t.Errorf("vault source %+v, %v: want a Vault source copied into namespaces, delete", s, err)
	}
}

// TestMatcher: unanchored Go regular expressions, as mirrors matches;
// v1alpha1's namespaceRegex one more, its namespace an exact name.
func TestMatcher(t *testing.T) {
	for _, tc := range []struct {
		name string
		dest mirrorsv1alpha2.SecretMirrorDestination
		in   []string
		out  []string
	}{
		{"unanchored", mirrorsv1alpha2.SecretMirrorDestination{Namespaces: []string{`demo-\d+`}},
			[]string{"demo-1", "old-demo-12", "demo-3x"}, []string{"demo-", "demo"}},
		{"anchored, two", mirrorsv1alpha2.SecretMirrorDestination{Namespaces: []string{`^team-[a-z]+$`, `^project-a-`}},
			[]string{"team-a", "project-a-feature"}, []string{"team-1", "my-team-a", "project-b-1"}},
		{"v1alpha1 namespaceRegex", mirrorsv1alpha2.SecretMirrorDestination{NamespaceRegex: `^testns\d+$`},
			[]string{"testns1"}, []string{"testns"}},
		{"v1alpha1 namespace, exact", mirrorsv1alpha2.SecretMirrorDestination{Namespace: "a.b"},
			[]string{"a.b"}, []string{"axb", "a.bc", "xa.b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := compile(tc.dest)
			if err != nil {
				t.Fatal(err)
			}
			for _, ns := range tc.in {
				if !m.matches(ns) {
					t.Errorf("%q does not match", ns)
				}
			}
			for _, ns := range tc.out {
				if m.matches(ns) {
					t.Errorf("%q matches", ns)
				}
			}
		})
	}
}

// TestCompileErrors name the field, the index and the fix.
func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		dest mirrorsv1alpha2.SecretMirrorDestination
		want string
	}{
		{mirrorsv1alpha2.SecretMirrorDestination{}, "spec.destination.namespaces is empty"},
		{mirrorsv1alpha2.SecretMirrorDestination{Namespaces: []string{"a", ""}}, "spec.destination.namespaces[1] is empty"},
		{mirrorsv1alpha2.SecretMirrorDestination{Namespaces: []string{`(?!x)`}}, "spec.destination.namespaces[0] \"(?!x)\": error parsing regexp"},
	} {
		_, err := compile(tc.dest)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.dest, err, tc.want)
		}
	}
	// The spec's own slice is never appended to.
	ns := make([]string, 1, 4)
	ns[0] = "a"
	if _, err := compile(mirrorsv1alpha2.SecretMirrorDestination{Namespaces: ns, NamespaceRegex: "b"}); err != nil {
		t.Fatal(err)
	}
	if got := ns[:2][1]; got != "" {
		t.Errorf("compile wrote %q into the spec's backing array", got)
	}
}
