package keymount_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// securityDoc is docs/security.md, relative to the chart.
const securityDoc = "../../../docs/security.md"

// rulesTableHeading heads the section of docs/security.md whose table lists
// every rule the chart grants, per ServiceAccount.
const rulesTableHeading = "### Every ServiceAccount's rules in the chart"

// docRule is one row of that table: a rule bound to a ServiceAccount, on
// when every one of values is true.
type docRule struct {
	values []string
	grant  string // ServiceAccount, role and rule, as grantKey writes them
}

var backticked = regexp.MustCompile("`([^`]*)`")

// ticks returns the backticked words of a table cell.
func ticks(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// parseRuleRow parses the cells of one row of the rules table.
func parseRuleRow(t *testing.T, line string, cells []string) docRule {
	t.Helper()
	if len(cells) != 7 {
		t.Fatalf("row %q: %d cells, want 7", line, len(cells))
	}
	sa := ticks(cells[2])
	roleName := ticks(cells[3])
	roleKind, _, _ := strings.Cut(cells[3], " ")
	if len(sa) != 1 || len(roleName) != 1 || (roleKind != "ClusterRole" && roleKind != "Role") {
		t.Fatalf("row %q: want one ServiceAccount and a ClusterRole or Role", line)
	}
	var rule rbacv1.PolicyRule
	for v := range strings.SplitSeq(cells[6], ",") {
		rule.Verbs = append(rule.Verbs, strings.TrimSpace(v))
	}
	if cells[4] == "non-resource" {
		rule.NonResourceURLs = ticks(cells[5])
	} else {
		for _, g := range ticks(cells[4]) {
			rule.APIGroups = append(rule.APIGroups, strings.Trim(g, `"`))
		}
		rule.Resources = ticks(cells[5])
		if len(rule.APIGroups) == 0 {
			t.Fatalf("row %q: no apiGroups", line)
		}
	}
	return docRule{values: ticks(cells[1]), grant: grantKey(sa[0], roleKind+" "+roleName[0], rule)}
}

// grantKey writes a rule bound to the ServiceAccount sa through role (kind
// and name) as one comparable line.
func grantKey(sa, role string, rule rbacv1.PolicyRule) string {
	return fmt.Sprintf("%s: %s: apiGroups %q resources %q nonResourceURLs %q verbs %q",
		sa, role, rule.APIGroups, rule.Resources, rule.NonResourceURLs, rule.Verbs)
}

// readRulesTable parses the table of docs/security.md.
func readRulesTable(t *testing.T) []docRule {
	t.Helper()
	data, err := os.ReadFile(securityDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n"+rulesTableHeading+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", securityDoc, rulesTableHeading)
	}
	var rows []docRule
	inTable := false
	for line := range strings.SplitSeq(section, "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if !inTable {
			want := []string{"feature", "chart values", "ServiceAccount", "role", "apiGroups", "resources", "verbs"}
			if !slices.Equal(cells, want) {
				t.Fatalf("the table's columns %q, want %q", cells, want)
			}
			inTable = true
			continue
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		rows = append(rows, parseRuleRow(t, line, cells))
	}
	if len(rows) == 0 {
		t.Fatalf("no rows in the table under %q", rulesTableHeading)
	}
	return rows
}

// boundRules returns every rule the release binds to a ServiceAccount, as
// grantKey writes them, sorted; a binding to anything but a ServiceAccount
// fails.
func boundRules(t *testing.T, r *release) []string {
	t.Helper()
	var out []string
	add := func(binding string, subjects []rbacv1.Subject, kind, name string, rules []rbacv1.PolicyRule) {
		for _, s := range subjects {
			if s.Kind != "ServiceAccount" || s.Namespace != namespace {
				t.Errorf("binding %s binds %s %s/%s: want the release's ServiceAccounts only", binding, s.Kind, s.Namespace, s.Name)
				continue
			}
			for _, rule := range rules {
				out = append(out, grantKey(s.Name, kind+" "+name, rule))
			}
		}
	}
	for name, b := range r.bindings {
		role := r.clusterRoles[b.RoleRef.Name]
		if b.RoleRef.Kind != "ClusterRole" || role == nil {
			t.Errorf("binding %s refers to %s %s, which the chart does not render", name, b.RoleRef.Kind, b.RoleRef.Name)
			continue
		}
		add(name, b.Subjects, "ClusterRole", role.Name, role.Rules)
	}
	for name, b := range r.roleBindings {
		role := r.roles[b.RoleRef.Name]
		if b.RoleRef.Kind != "Role" || role == nil || role.Namespace != b.Namespace || b.Namespace != namespace {
			t.Errorf("RoleBinding %s/%s refers to %s %s, which the chart does not render in %s", b.Namespace, name, b.RoleRef.Kind, b.RoleRef.Name, namespace)
			continue
		}
		add(name, b.Subjects, "Role", role.Name, role.Rules)
	}
	slices.Sort(out)
	return out
}

// setValue returns vals with the dotted key set to v (a copy where it
// changes).
func setValue(vals map[string]any, key string, v any) map[string]any {
	head, rest, nested := strings.Cut(key, ".")
	out := map[string]any{}
	for k, x := range vals {
		out[k] = x
	}
	if !nested {
		out[head] = v
		return out
	}
	sub, _ := out[head].(map[string]any)
	if sub == nil {
		sub = map[string]any{}
	}
	out[head] = setValue(sub, rest, v)
	return out
}

// everyFeature is the values of testdata/all-features.yaml with every value
// the rules table names set true.
func everyFeature(t *testing.T, rows []docRule) map[string]any {
	t.Helper()
	vals := readValues(t, allFeatures)
	for _, row := range rows {
		for _, v := range row.values {
			vals = setValue(vals, v, true)
		}
	}
	return vals
}

// TestServiceAccountRulesAreTheDocs: the rules the chart binds to each
// ServiceAccount are exactly the rows of docs/security.md's table, with
// every feature on, and with each value the table names turned off in turn
// (then exactly the rows that do not need it), so neither the chart nor the
// table can change alone, and each row's chart values are the ones that
// turn it on.
func TestServiceAccountRulesAreTheDocs(t *testing.T) {
	rows := readRulesTable(t)
	all := everyFeature(t, rows)
	expect := func(off string) []string {
		var out []string
		for _, row := range rows {
			if !slices.Contains(row.values, off) {
				out = append(out, row.grant)
			}
		}
		slices.Sort(out)
		return out
	}
	if diff := cmp.Diff(expect(""), boundRules(t, renderValues(t, all))); diff != "" {
		t.Errorf("every feature on: rules per ServiceAccount (-%s +chart):\n%s", securityDoc, diff)
	}
	var values []string
	for _, row := range rows {
		for _, v := range row.values {
			if !slices.Contains(values, v) {
				values = append(values, v)
			}
		}
	}
	if len(values) < 8 {
		t.Fatalf("the table names the values %v: want at least 8", values)
	}
	for _, v := range values {
		t.Run(v+"=false", func(t *testing.T) {
			got := boundRules(t, renderValues(t, setValue(all, v, false)))
			if diff := cmp.Diff(expect(v), got); diff != "" {
				t.Errorf("rules per ServiceAccount with %s=false (-%s +chart):\n%s", v, securityDoc, diff)
			}
		})
	}
}

// tokenHolders are the containers of the chart that mount a ServiceAccount
// token, each with the volume it comes from: the node plugin and the
// controller their pods' (projected, api-access), keymount's AWS and Vault
// providers in the controller's pod their own ServiceAccounts'.
var tokenHolders = map[string]string{
	driverContainer:  apiAccess,
	"controller":     apiAccess,
	"provider-aws":   sidecarAPIAccess("provider-aws"),
	"provider-vault": sidecarAPIAccess("provider-vault"),
}

// TestNoSidecarHoldsAToken: in every pod the chart renders with every
// feature on (and with automountServiceAccountToken off), no container but
// those of tokenHolders mounts a ServiceAccount token; a pod that lets
// Kubernetes mount its token (automountServiceAccountToken not false) has
// one container, which uses it (a provider DaemonSet's).
func TestNoSidecarHoldsAToken(t *testing.T) {
	rows := readRulesTable(t)
	for _, vals := range []map[string]any{everyFeature(t, rows), setValue(everyFeature(t, rows), "automountServiceAccountToken", false)} {
		r := renderValues(t, vals)
		pods := map[string]*corev1.PodSpec{}
		for name, ds := range r.daemonSets {
			pods["DaemonSet "+name] = &ds.Spec.Template.Spec
		}
		for name, d := range r.deployments {
			pods["Deployment "+name] = &d.Spec.Template.Spec
		}
		if len(pods) < 5 {
			t.Fatalf("%d pods rendered, want the node plugin, three provider DaemonSets and the controller", len(pods))
		}
		sidecars := 0
		for name, pod := range pods {
			containers := slices.Concat(pod.InitContainers, pod.Containers)
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				if len(containers) != 1 {
					t.Errorf("%s mounts its ServiceAccount token into each of its containers %v", name, containerNames(containers))
				}
				continue
			}
			sidecars += len(containers) - 1
			for _, c := range containers {
				for _, m := range c.VolumeMounts {
					v := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
					if v < 0 {
						t.Errorf("%s: container %s mounts the missing volume %s", name, c.Name, m.Name)
						continue
					}
					holds := strings.HasPrefix(m.MountPath, "/var/run/secrets/kubernetes.io") || carriesToken(&pod.Volumes[v])
					if holds && tokenHolders[c.Name] != m.Name {
						t.Errorf("%s: container %s mounts a ServiceAccount token (volume %s at %s)", name, c.Name, m.Name, m.MountPath)
					}
				}
			}
		}
		// The node plugin's registrar and liveness probe, the controller's
		// provider sidecars.
		if sidecars < 5 {
			t.Errorf("%d sidecars checked, want at least 5", sidecars)
		}
	}
}

// carriesToken reports whether v holds a ServiceAccount token: projected
// from the pod's ServiceAccount, or a Secret the chart renders of type
// service-account-token (named as the controller's sidecars' are).
func carriesToken(v *corev1.Volume) bool {
	if v.Projected != nil {
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				return true
			}
		}
	}
	return v.Secret != nil && strings.HasSuffix(v.Secret.SecretName, "-token")
}
