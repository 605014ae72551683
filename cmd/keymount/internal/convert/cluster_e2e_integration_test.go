//go:build integration

package convert_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/keymount/keymount/cmd/keymount/internal/convert"
	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/reflector"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/tests/ctrltest"
	"github.com/keymount/keymount/tests/motoserver"
	"github.com/keymount/keymount/tests/poll"
)

// clusterInput is a ClusterExternalSecret on a ClusterSecretStore that
// assumed a role from External Secrets' controller identity.
const clusterInput = `apiVersion: external-secrets.io/v1beta1
kind: ClusterSecretStore
metadata: {name: central}
spec:
  provider:
    aws: {service: SecretsManager, region: eu-west-1, role: ` + roleARN + `}
---
apiVersion: external-secrets.io/v1beta1
kind: ClusterExternalSecret
metadata: {name: shared-db}
spec:
  namespaces: [ces-named]
  namespaceSelectors:
    - matchLabels: {team: payments}
    - matchExpressions: [{key: env, operator: In, values: [prod]}]
  externalSecretSpec:
    secretStoreRef: {name: central, kind: ClusterSecretStore}
    target: {name: db}
    data:
      - secretKey: password
        remoteRef: {key: team/db, property: password}
`

// TestConvertedClusterExternalSecret applies what convert makes of a
// ClusterExternalSecret (the Namespace, the ServiceAccount with the
// store's role, the class, the SecretSync) to a real API server with
// keymount-controller's SecretSync reconciler and fan-out, the AWS provider
// against moto: the Secret External Secrets would write reaches every
// namespace the names or either selector hold, a namespace created
// matching later gets it, one relabelled away loses it, and no other
// namespace has it. No hand-made ServiceAccount: the one convert wrote
// reads.
func TestConvertedClusterExternalSecret(t *testing.T) {
	endpoint := motoserver.Start(t)
	values := seedStore(t, endpoint)
	cl := startCluster(t, endpoint, region)
	startFanout(t, cl)
	for name, labels := range map[string]map[string]string{
		"ces-team": {"team": "payments"}, "ces-prod": {"env": "prod"}, "ces-named": nil, "ces-other": {"team": "ops"},
	} {
		if err := cl.c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
	}

	if got := createEach(t, cl, convertInput(t, clusterInput, convert.Options{})); !cmp.Equal(got, []string{"Namespace", "ServiceAccount", "SecretProviderClass", "SecretSync"}) {
		t.Fatalf("applied %v, want a Namespace, a ServiceAccount, a class and a SecretSync", got)
	}

	want := map[string][]byte{"password": esoValue(t, values["team/db"], "password")}
	for _, ns := range []string{convert.DefaultClusterNamespace, "ces-team", "ces-prod", "ces-named"} {
		waitData(t, cl, ns, "db", want)
	}
	start := time.Now()
	if err := cl.c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ces-late", Labels: map[string]string{"env": "prod"}}}); err != nil {
		t.Fatal(err)
	}
	waitData(t, cl, "ces-late", "db", want)
	t.Logf("the Secret reached a namespace created later after %v", time.Since(start))

	ns := &corev1.Namespace{}
	if err := cl.c.Get(t.Context(), client.ObjectKey{Name: "ces-team"}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels = map[string]string{"team": "ops"}
	if err := cl.c.Update(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	waitData(t, cl, "ces-team", "db", nil)
	for _, ns := range []string{"ces-other", "ces-team"} {
		if _, err := cl.cs.CoreV1().Secrets(ns).Get(t.Context(), "db", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s/db: %v, want none", ns, err)
		}
	}
}

// startFanout runs keymount-controller's fan-out (reflector's annotations)
// against the cluster until the test ends.
func startFanout(t *testing.T, cl *cluster) {
	t.Helper()
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	mgr := ctrltest.NewManager(t, cl.cfg, ctrl.Options{Scheme: scheme})
	c, err := fanout.NewCache(mgr)
	if err != nil {
		t.Fatal(err)
	}
	m, err := fanout.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := reflector.SetupWithManager(t.Context(), mgr, reflector.Options{Cache: c, Workers: 2, Metrics: m}); err != nil {
		t.Fatal(err)
	}
	ctrltest.Start(t, mgr)
}

// createEach creates every document of out, in order, and returns their
// kinds.
func createEach(t *testing.T, cl *cluster, out []byte) []string {
	t.Helper()
	var kinds []string
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(strings.TrimPrefix(doc, "---\n")), &obj); err != nil {
			t.Fatalf("output document: %v\n%s", err, doc)
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if err := cl.c.Create(t.Context(), u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		kinds = append(kinds, u.GetKind())
	}
	return kinds
}

// waitData waits until the Secret ns/name holds exactly data (nil: until
// it does not exist).
func waitData(t *testing.T, cl *cluster, ns, name string, data map[string][]byte) {
	t.Helper()
	var last string
	err := poll.Wait(t.Context(), eventually, func(ctx context.Context) (bool, error) {
		s, err := cl.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			last = "missing"
			return data == nil, nil
		case err != nil:
			return false, err
		case data == nil:
			last = "exists"
			return false, nil
		}
		last = fmt.Sprintf("keys %v", keysOf(s.Data))
		return cmp.Equal(s.Data, data), nil
	})
	if err != nil {
		t.Fatalf("Secret %s/%s: %v (last: %s)", ns, name, err, last)
	}
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
