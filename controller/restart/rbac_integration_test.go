//go:build integration

package restart_test

import (
	secretsstorev1 "github.com/keymount/keymount/apis/v1"

	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/controller/restart"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/poll"
)

// TestControllerWithComponentRBAC: keymount-controller's ServiceAccount
// with the component's RBAC and admission policy as shipped, and nothing
// else, runs both reconcilers: its trimmed caches sync (pod statuses,
// labelled Secrets, workloads), a changed synced Secret restarts an
// annotated consumer, and a pod status's change report restarts the pod's
// Deployment; the policy admits both patches.
func TestControllerWithComponentRBAC(t *testing.T) {
	a := startAPIWithCRDs(t)
	applyComponent(t, a, "rbac.yaml", "admission.yaml")
	f := &secretFixture{a: a, ns: a.namespace(t)}
	f.secret(t, "canary", true, "canary-0")
	f.secret(t, "db-creds", true, "v1")
	f.consumer(t, "canary", "canary", "env", true)
	consumer := f.consumer(t, "consumer", "db-creds", "envFrom", true)
	d, rs := a.deployment(t, f.ns)
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(a.env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), class(f.ns, "db", map[string]string{rotation.RestartAnnotation: "true"})); err != nil {
		t.Fatal(err)
	}

	_, cfg := a.env.KubeconfigFor(t, controllerUser, []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"})
	startController(t, cfg, restart.Options{HashKey: testHashKey})
	f.roundTrip(t) // the caches synced as the controller

	f.setSecret(t, "db-creds", "v2")
	key := restart.SecretAnnotationKey("db-creds")
	poll.UntilTrue(t, "the consumer's restart", func() bool { return f.get(t, "consumer").Spec.Template.Annotations[key] == value("v2") })
	if got := f.get(t, "consumer").Generation; got != consumer.Generation+1 {
		t.Errorf("consumer generation %d, want %d", got, consumer.Generation+1)
	}

	ref := controllerRef("ReplicaSet", rs.Name, rs)
	report(t, c, a.pod(t, f.ns, "web-1-a", "node-a", "db", &ref, nil), "db", "2", "")
	want := restart.AnnotationValue([]secretsstorev1.SecretProviderClassObject{{ID: "db/password", Version: "2"}, {ID: "db/user", Version: "1"}})
	poll.UntilTrue(t, "the Deployment's restart", func() bool {
		return a.getDeployment(t, f.ns, d.Name).Spec.Template.Annotations[restart.AnnotationKey("db")] == want
	})
	got, err := a.admin.AppsV1().Deployments(f.ns).Get(t.Context(), d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != d.Generation+1 {
		t.Errorf("Deployment generation %d, want %d", got.Generation, d.Generation+1)
	}
}
