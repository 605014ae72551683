//go:build integration

package reflector_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/reflector"
	"github.com/keymount/keymount/tests/ctrltest"
)

// clusterSource are the annotations keymount convert writes on the Secret
// of a ClusterExternalSecret with namespaces and namespaceSelectors: the
// names as patterns, the selectors OR-ed (keymount's -selectors).
func clusterSource(names, selectors string) map[string]string {
	a := auto(names, names)
	a[reflector.AnnotationAllowedNamespacesSelectors] = selectors
	a[reflector.AnnotationAutoNamespacesSelectors] = selectors
	return a
}

// TestClusterSelectors: a source whose namespaces are a name list and two
// OR-ed label selectors (what a ClusterExternalSecret's namespaces and
// namespaceSelectors become) is copied into every namespace that either
// selector or the list holds; a namespace created or relabelled later to
// match gets its copy, one relabelled away loses it, and a same-named
// Secret keymount did not write is neither overwritten nor deleted.
func TestClusterSelectors(t *testing.T) {
	f := startFixture(t)
	f.namespace(t, "ces-src", nil)
	f.namespace(t, "ces-team", map[string]string{"team": "a"})
	f.namespace(t, "ces-prod", map[string]string{"env": "prod"})
	f.namespace(t, "ces-named", nil)
	f.namespace(t, "ces-other", map[string]string{"team": "b"})
	f.namespace(t, "ces-hand", nil)
	f.source(t, "ces-hand", "db", map[string]string{"k": "by hand"}, nil)
	f.source(t, "ces-src", "db", map[string]string{"k": "v1"}, clusterSource("ces-named", "team=a; env in (prod,staging)"))

	for _, ns := range []string{"ces-team", "ces-prod", "ces-named"} {
		f.waitFor(t, ns, "db", ctrltest.HasData(map[string]string{"k": "v1"}))
	}
	// A later namespace, created matching: its copy arrives (the
	// namespace watch), timed for the log only.
	start := time.Now()
	f.namespace(t, "ces-late", map[string]string{"team": "a"})
	f.waitFor(t, "ces-late", "db", ctrltest.HasData(map[string]string{"k": "v1"}))
	t.Logf("copy in a new matching namespace after %v", time.Since(start))

	// A namespace relabelled to match gets its copy; one relabelled away
	// loses it; the others stay.
	f.relabel(t, "ces-other", map[string]string{"env": "staging"})
	f.waitFor(t, "ces-other", "db", ctrltest.HasData(map[string]string{"k": "v1"}))
	f.relabel(t, "ces-team", map[string]string{"team": "c"})
	f.waitFor(t, "ces-team", "db", absent)
	f.waitFor(t, "ces-prod", "db", ctrltest.HasData(map[string]string{"k": "v1"}))

	// A Secret of the same name keymount did not write, in a namespace
	// that comes to match: reported, left as it is, and not deleted when
	// the namespace stops matching.
	f.relabel(t, "ces-hand", map[string]string{"team": "a"})
	f.waitEvent(t, "ces-src", "db", fanout.ReasonCopyConflict)
	f.relabel(t, "ces-hand", nil)
	// The source changed: the change reaches every copy, and the
	// hand-made Secret is still its own.
	f.update(t, "ces-src", "db", func(s *corev1.Secret) { s.StringData = map[string]string{"k": "v2"} })
	for _, ns := range []string{"ces-prod", "ces-named", "ces-late", "ces-other"} {
		f.waitFor(t, ns, "db", ctrltest.HasData(map[string]string{"k": "v2"}))
	}
	f.waitFor(t, "ces-hand", "db", ctrltest.HasData(map[string]string{"k": "by hand"}))
	f.waitFor(t, "ces-team", "db", absent)
}
