package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keymount/keymount/tests/poll"
)

// TestAggregatedRoles: the aggregated ClusterRoles deploy/ ships under
// upstream's names give the built-in admin, edit and view roles access to
// SecretProviderClasses and their pod statuses, as upstream's do, once
// kube-controller-manager aggregates them.
func TestAggregatedRoles(t *testing.T) {
	s := env(t)
	createManifests(t, s.ctrl, filepath.Join(s.repo, "deploy", "aggregated-roles.yaml"), "ClusterRole")
	t.Cleanup(func() {
		for _, name := range []string{"secretproviderclasses-admin-role", "secretproviderclasses-viewer-role", "secretproviderclasspodstatuses-viewer-role"} {
			if err := s.kube.RbacV1().ClusterRoles().Delete(context.WithoutCancel(t.Context()), name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete ClusterRole %s: %v", name, err)
			}
		}
	})
	want := map[string]map[string][]string{ // role -> resource -> verbs it must grant
		"admin": {"secretproviderclasses": {"create", "delete", "update"}, "secretproviderclasspodstatuses": {"get", "list"}},
		"edit":  {"secretproviderclasses": {"create", "delete", "update"}, "secretproviderclasspodstatuses": {"get", "list"}},
		"view":  {"secretproviderclasses": {"get", "list", "watch"}, "secretproviderclasspodstatuses": {"get", "list", "watch"}},
	}
	for role, resources := range want {
		poll.Until(t, "ClusterRole "+role+" aggregating keymount's roles", func(ctx context.Context) (bool, error) {
			cr, err := s.kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for resource, verbs := range resources {
				for _, verb := range verbs {
					if !grants(cr.Rules, "secrets-store.csi.x-k8s.io", resource, verb) {
						return false, nil
					}
				}
			}
			return true, nil
		})
	}
	// view must not be able to change classes.
	cr, err := s.kube.RbacV1().ClusterRoles().Get(t.Context(), "view", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if grants(cr.Rules, "secrets-store.csi.x-k8s.io", "secretproviderclasses", "delete") {
		t.Error("view can delete SecretProviderClasses")
	}
}

func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}
