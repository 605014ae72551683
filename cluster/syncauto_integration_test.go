//go:build integration

package cluster

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"

	"github.com/keymount/keymount/tests/k8senv"
)

// TestSyncSecretsAuto: --sync-secrets=auto turns sync on exactly when the
// driver's identity may list, watch, create and patch Secrets everywhere:
// not without rules, not with read rules only, yes with the secret-sync
// rules (upstream's syncSecret.enabled grants the same).
func TestSyncSecretsAuto(t *testing.T) {
	// The package's shared control plane: the users, the ClusterRoles and their bindings have
	// names of this run's own, and no test of the package grants anything to a group.
	env := k8senv.Shared(t, k8senv.Options{CRDDirectoryPaths: []string{"../deploy/crds"}})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	run := rand.String(5)
	bind := func(user string, verbs ...string) {
		t.Helper()
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "secrets-" + user},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: verbs}},
		}
		if _, err := cs.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		b := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "secrets-" + user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(t.Context(), b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind("reader-"+run, "get", "list", "watch")
	bind("syncer-"+run, "get", "list", "watch", "create", "patch", "delete")
	for _, tc := range []struct {
		user     string
		wantSync bool
	}{
		{"nobody-" + run, false},
		{"reader-" + run, false},
		{"syncer-" + run, true},
	} {
		_, rc := env.KubeconfigFor(t, tc.user, nil)
		cfg := Config{Rest: rc, SyncSecretsAuto: true}
		if err := decideSync(t.Context(), &cfg); err != nil {
			t.Fatalf("%s: %v", tc.user, err)
		}
		if cfg.SyncSecrets != tc.wantSync {
			t.Errorf("%s: sync %v, want %v", tc.user, cfg.SyncSecrets, tc.wantSync)
		}
	}
	explicit := Config{Rest: env.Config, SyncSecrets: false}
	if err := decideSync(t.Context(), &explicit); err != nil || explicit.SyncSecrets {
		t.Errorf("an explicit --sync-secrets=false was changed: %v, %v", explicit.SyncSecrets, err)
	}
}
