//go:build integration

package cluster_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/cluster"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// logBuffer collects klog's structured output.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) add(prefix, args string) {
	b.mu.Lock()
	b.lines = append(b.lines, prefix+" "+args)
	b.mu.Unlock()
}

func (b *logBuffer) find(substrs ...string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		found := true
		for _, s := range substrs {
			found = found && strings.Contains(l, s)
		}
		if found {
			return l
		}
	}
	return ""
}

// TestStartWithoutRBACServesAndNamesTheRule: without its RBAC rules the
// cluster side starts at once (the driver serves kubelet meanwhile), reports
// not synced, and logs the rule that is missing; once the rules are granted,
// the caches sync.
func TestStartWithoutRBACServesAndNamesTheRule(t *testing.T) {
	// The package's shared control plane: the identity, the ClusterRole and its binding have
	// names of this run's own, and no test of the package grants anything to a group.
	env := k8senv.Shared(t, k8senv.Options{CRDDirectoryPaths: []string{"../deploy/crds"}})
	logs := &logBuffer{}
	// Kept for the rest of the process: the cluster's goroutines log until
	// they notice their context ended, and klog's logger is not safe to swap
	// under them.
	klog.SetLogger(funcr.New(logs.add, funcr.Options{}))

	user := "system:serviceaccount:kube-system:keymount-" + rand.String(5)
	_, cfg := env.KubeconfigFor(t, user, []string{"system:serviceaccounts"})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cl, err := cluster.Start(ctx, cluster.Config{Rest: cfg, Node: "node-rbac", DriverName: "secrets-store.csi.k8s.io",
		DiagnoseAfter: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("Start without RBAC: %v (it must not wait for the caches)", err)
	}
	if cl.Synced() {
		t.Fatal("synced without permission to list anything")
	}
	// One diagnosis lists every watched type, in any order: wait for both.
	poll.UntilTrue(t, "a log line naming the missing RBAC rule on secretproviderclasses", func() bool {
		return logs.find("RBAC rule missing", "secretproviderclasses", "get, list and watch") != ""
	})
	poll.UntilTrue(t, "a log line naming the missing RBAC rule on pods", func() bool {
		return logs.find("RBAC rule missing", "on pods (apiGroups") != ""
	})

	grant(t, env, user)
	poll.UntilTrue(t, "the caches to sync once the rules are granted", cl.Synced)
}

// grant binds the rules of deploy/rbac.yaml's ClusterRole to user.
func grant(t *testing.T, env *k8senv.Env, user string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "keymount-test-"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"secrets-store.csi.x-k8s.io"}, Resources: []string{"secretproviderclasses", "secretproviderclasspodstatuses"},
				Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	role, err := cs.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
