package deploy_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
)

const aggregateTo = "rbac.authorization.k8s.io/aggregate-to-"

// upstreamRoles are the aggregated ClusterRoles the upstream driver ships
// (v1.6 chart): names, aggregation labels and rules.
var upstreamRoles = map[string]struct {
	aggregateTo []string
	rules       []rbacv1.PolicyRule
}{
	"secretproviderclasses-admin-role": {
		aggregateTo: []string{"admin", "edit"},
		rules: []rbacv1.PolicyRule{{
			APIGroups: []string{group},
			Resources: []string{"secretproviderclasses"},
			Verbs:     []string{"create", "delete", "get", "list", "patch", "update", "watch"},
		}},
	},
	"secretproviderclasses-viewer-role": {
		aggregateTo: []string{"view"},
		rules: []rbacv1.PolicyRule{{
			APIGroups: []string{group},
			Resources: []string{"secretproviderclasses"},
			Verbs:     []string{"get", "list", "watch"},
		}},
	},
	"secretproviderclasspodstatuses-viewer-role": {
		aggregateTo: []string{"view"},
		rules: []rbacv1.PolicyRule{{
			APIGroups: []string{group},
			Resources: []string{"secretproviderclasspodstatuses"},
			Verbs:     []string{"get", "list", "watch"},
		}},
	},
}

// TestAggregatedRoles: deploy/ ships upstream's aggregated ClusterRoles
// under upstream's names, aggregated into exactly upstream's built-in
// roles, with upstream's rules.
func TestAggregatedRoles(t *testing.T) {
	r := mustRender(t, deployFS(t), "/deploy")
	for name, want := range upstreamRoles {
		t.Run(name, func(t *testing.T) {
			role, ok := r.clusterRoles[name]
			if !ok {
				t.Fatalf("no ClusterRole %s in %v", name, r.kinds)
			}
			var to []string
			for k, v := range role.Labels {
				if target, ok := strings.CutPrefix(k, aggregateTo); ok {
					if v != "true" {
						t.Errorf("label %s=%q, want \"true\"", k, v)
					}
					to = append(to, target)
				}
			}
			if slices.Sort(to); !slices.Equal(to, want.aggregateTo) {
				t.Errorf("aggregated to %v, want %v (labels %v)", to, want.aggregateTo, role.Labels)
			}
			rules := slices.Clone(role.Rules)
			for i := range rules {
				rules[i].Verbs = slices.Sorted(slices.Values(rules[i].Verbs))
			}
			if diff := cmp.Diff(want.rules, rules); diff != "" {
				t.Errorf("rules (-upstream +keymount):\n%s", diff)
			}
			if role.AggregationRule != nil || role.Namespace != "" {
				t.Errorf("aggregationRule %v namespace %q, want neither", role.AggregationRule, role.Namespace)
			}
		})
	}
	// The driver's own roles aggregate nowhere: no user gains its rights.
	for _, name := range slices.Sorted(maps.Keys(r.clusterRoles)) {
		if _, ok := upstreamRoles[name]; ok {
			continue
		}
		for k := range r.clusterRoles[name].Labels {
			if strings.HasPrefix(k, aggregateTo) {
				t.Errorf("ClusterRole %s has aggregation label %s", name, k)
			}
		}
	}
}
