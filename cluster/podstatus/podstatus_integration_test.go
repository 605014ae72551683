//go:build integration

package podstatus_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster/podstatus"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

const podStatusCRD = "secretproviderclasspodstatuses.secrets-store.csi.x-k8s.io"

// TestIntegrationAgainstAPIServer writes pod statuses to a real
// kube-apiserver with the repository's CRDs, and proves what the fake
// cannot: the API accepts the object and its conditions, v1alpha1 serves
// it, the printer columns evaluate, an identical republish sends no write
// request at all, and the owner reference lets the garbage collector
// remove the status with its pod.
func TestIntegrationAgainstAPIServer(t *testing.T) {
	// Own control plane: it counts requests in the audit log.
	env := k8senv.Start(t, k8senv.Options{
		CRDDirectoryPaths: []string{"../../deploy/crds"},
		AuditLog:          true,
		ControllerManager: true,
	})
	c := newAPIClient(t, env.Config)
	pod := createPod(t, c)

	clk := clocktesting.NewFakePassiveClock(t0)
	api, err := kube.NewAPI(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	w := podstatus.New(api, api, testNode, clk)
	o := outcome(t0)
	o.PodUID = string(pod.UID)
	if err := w.Publish(t.Context(), o, nil); err != nil {
		t.Fatalf("Publish: %v", err)
	}

	st := getStatus(t, c, testClass)
	checkStored(t, st, string(pod.UID))
	checkV1alpha1(t, c, st)
	checkPrinterColumns(t, c)
	checkTable(t, env.Config, map[string]string{
		"Name": st.Name, "Pod": testPod, "Class": testClass, "Mounted": "True", "Current": "True", "Reason": "Refreshed",
	})

	// Identical republishes a minute apart: no write reaches the API.
	for i := 1; i <= 3; i++ {
		now := t0.Add(time.Duration(i) * time.Minute)
		clk.SetTime(now)
		if err := w.Publish(t.Context(), republish(o, now), nil); err != nil {
			t.Fatalf("republish %d: %v", i, err)
		}
	}
	if got := getStatus(t, c, testClass).ResourceVersion; got != st.ResourceVersion {
		t.Errorf("resourceVersion %s → %s after identical republishes, want unchanged", st.ResourceVersion, got)
	}
	if n := auditedWrites(t, env); n != 1 {
		t.Errorf("the API server saw %d writes of pod statuses, want 1 (the create)", n)
	}

	// A failed refresh is accepted by the API's condition validation.
	failed := republish(o, t0)
	failed.Err = errors.New(`provider "aws": rpc error: code = Unavailable desc = connection refused`)
	if err := w.Publish(t.Context(), failed, nil); err != nil {
		t.Fatalf("Publish after a failed refresh: %v", err)
	}
	checkTable(t, env.Config, map[string]string{"Mounted": "True", "Current": "False", "Reason": "RefreshFailed"})

	// The garbage collector follows the owner reference.
	if err := c.Delete(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, st)
	if err := w.Delete(t.Context(), record()); err != nil {
		t.Errorf("Delete of a status already gone: %v", err)
	}
}

func newAPIClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, secretsstorev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func createPod(t *testing.T, c client.Client) *corev1.Pod {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testPod},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	if err := c.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func checkStored(t *testing.T, st *secretsstorev1.SecretProviderClassPodStatus, podUID string) {
	t.Helper()
	if got := st.Labels[secretsstorev1.InternalNodeLabel]; got != testNode {
		t.Errorf("node label = %q, want %q", got, testNode)
	}
	wantRefs := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: testPod, UID: types.UID(podUID)}}
	if d := cmp.Diff(wantRefs, st.OwnerReferences); d != "" {
		t.Errorf("owner references (-want +got):\n%s", d)
	}
	s := st.Status
	if s.PodName != testPod || s.SecretProviderClassName != testClass || !s.Mounted || s.TargetPath != testPath ||
		len(s.Objects) != 2 || s.Objects[0].ID != "secretsmanager/api" || s.ObservedGeneration != 3 {
		t.Errorf("status = %+v", s)
	}
	if s.LastRefreshTime == nil || !s.LastRefreshTime.Time.Equal(t0) {
		t.Errorf("lastRefreshTime = %v, want %v", s.LastRefreshTime, t0)
	}
	wantCondition(t, st, secretsstorev1.ConditionMounted, metav1.ConditionTrue, "Mounted", "", t0)
	wantCondition(t, st, secretsstorev1.ConditionCurrent, metav1.ConditionTrue, "Refreshed", "", t0)
}

// checkV1alpha1 reads the status through the v1alpha1 endpoint that old
// manifests and tools use.
func checkV1alpha1(t *testing.T, c client.Client, st *secretsstorev1.SecretProviderClassPodStatus) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(secretsstorev1.GroupName + "/v1alpha1")
	u.SetKind("SecretProviderClassPodStatus")
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(st), u); err != nil {
		t.Fatalf("get through v1alpha1: %v", err)
	}
	if got := u.GetAPIVersion(); got != secretsstorev1.GroupName+"/v1alpha1" {
		t.Errorf("apiVersion = %q, want v1alpha1", got)
	}
	pod, _, _ := unstructured.NestedString(u.Object, "status", "podName")
	objects, _, _ := unstructured.NestedSlice(u.Object, "status", "objects")
	if pod != testPod || len(objects) != 2 || u.GetResourceVersion() != st.ResourceVersion {
		t.Errorf("v1alpha1 object: podName %q, %d objects, resourceVersion %s; want %q, 2, %s",
			pod, len(objects), u.GetResourceVersion(), testPod, st.ResourceVersion)
	}
}

func checkPrinterColumns(t *testing.T, c client.Client) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: podStatusCRD}, crd); err != nil {
		t.Fatal(err)
	}
	want := []string{"Pod", "Class", "Mounted", "Current", "Reason", "Refreshed", "Age"}
	for _, v := range crd.Spec.Versions {
		if v.Name != "v1" {
			continue
		}
		var got []string
		for _, col := range v.AdditionalPrinterColumns {
			got = append(got, col.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("v1 printer columns = %v, want %v", got, want)
		}
		if v.Subresources != nil && v.Subresources.Status != nil {
			t.Error("v1 has a status subresource; upstream's pod status has none and Writer relies on that")
		}
		return
	}
	t.Errorf("CRD %s serves no v1", podStatusCRD)
}

// checkTable asks the API server for the server-side table `kubectl get`
// prints and checks the named cells of the test pod status's row.
func checkTable(t *testing.T, cfg *rest.Config, want map[string]string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.JoinPath(cfg.Host, "apis", secretsstorev1.GroupName, "v1", "namespaces", testNS,
		"secretproviderclasspodstatuses", podstatus.Name(testPod, testNS, testClass))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s as a table: %s %v: %s", u, resp.Status, err, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("table has %d rows, want 1", len(table.Rows))
	}
	for i, col := range table.ColumnDefinitions {
		w, ok := want[col.Name]
		if !ok {
			continue
		}
		delete(want, col.Name)
		if got, _ := table.Rows[0].Cells[i].(string); got != w {
			t.Errorf("column %s = %v, want %q", col.Name, table.Rows[0].Cells[i], w)
		}
	}
	for name := range want {
		t.Errorf("table has no column %s", name)
	}
}

// auditedWrites counts the create, update and patch requests for pod
// statuses the API server has logged.
func auditedWrites(t *testing.T, env *k8senv.Env) int {
	t.Helper()
	ids := map[string]bool{}
	for _, ev := range env.AuditEvents(t) {
		if ev.ObjectRef == nil || ev.ObjectRef.Resource != "secretproviderclasspodstatuses" {
			continue
		}
		switch ev.Verb {
		case "create", "update", "patch":
			ids[string(ev.AuditID)] = true
		}
	}
	return len(ids)
}

func waitGone(t *testing.T, c client.Client, st *secretsstorev1.SecretProviderClassPodStatus) {
	t.Helper()
	err := poll.Wait(t.Context(), 60*time.Second, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(st), &secretsstorev1.SecretProviderClassPodStatus{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("pod status not garbage collected after its pod was deleted: %v", err)
	}
}
