//go:build integration

package v1alpha1_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	secretsyncv1alpha1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// fullSpec sets every field of v0.0.5's spec to a value its CRD accepts,
// at the edges of its validation.
func fullSpec() secretsyncv1alpha1.SecretSyncSpec {
	return secretsyncv1alpha1.SecretSyncSpec{
		SecretSyncControllerName: "any text <at all>\n",
		SecretProviderClassName:  "class.example-1",
		ServiceAccountName:       strings.Repeat("a", 253),
		ForceSynchronization:     "Rotate-2026.11.26_1",
		SecretObject: secretsyncv1alpha1.SecretObject{
			Type: "kubernetes.io/tls",
			Data: []secretsyncv1alpha1.SecretObjectData{
				{SourcePath: "cert.pem", TargetKey: "tls.crt"},
				{SourcePath: "bundle/0", TargetKey: "tls.key"},
				{SourcePath: ".hidden", TargetKey: "a"},
			},
			Labels: map[string]string{
				strings.Repeat("p", 253) + "/" + strings.Repeat("n", 63): strings.Repeat("v", 63),
				"app.kubernetes.io/name":                                 "",
			},
			Annotations: map[string]string{
				strings.Repeat("k", 316): strings.Repeat("x", 262144),
				"example.com/note":       "a value with spaces",
			},
		},
	}
}

func toUnstructured(t *testing.T, ss *secretsyncv1alpha1.SecretSync) *unstructured.Unstructured {
	t.Helper()
	ss.APIVersion, ss.Kind = secretsyncv1alpha1.SchemeGroupVersion.String(), "SecretSync"
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ss)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func fromUnstructured(t *testing.T, u *unstructured.Unstructured) *secretsyncv1alpha1.SecretSync {
	t.Helper()
	var ss secretsyncv1alpha1.SecretSync
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &ss, true); err != nil {
		t.Fatalf("the stored object does not decode strictly into keymount's types: %v", err)
	}
	return &ss
}

// testRoundTrip: an object valid for v0.0.5's CRD, every field set, is
// stored and read back unchanged, decodes strictly into keymount's types
// and encodes back to the same JSON; a new forceSynchronization is a new
// generation.
func (c cluster) testRoundTrip(t *testing.T) {
	ns := c.namespace(t)
	sent := &secretsyncv1alpha1.SecretSync{
		ObjectMeta: metav1.ObjectMeta{Name: "full", Namespace: ns},
		Spec:       fullSpec(),
	}
	res := c.dyn.Resource(secretSyncs).Namespace(ns)
	stored, err := res.Create(t.Context(), toUnstructured(t, sent), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	got := fromUnstructured(t, stored)
	if diff := cmp.Diff(sent.Spec, got.Spec); diff != "" {
		t.Errorf("stored spec (-sent +stored):\n%s", diff)
	}
	again, err := runtime.DefaultUnstructuredConverter.ToUnstructured(got)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored.Object["spec"], again["spec"]); diff != "" {
		t.Errorf("spec through keymount's types (-stored +re-encoded):\n%s", diff)
	}

	gen := got.Generation
	got.Spec.ForceSynchronization = "again"
	updated, err := res.Update(t.Context(), toUnstructured(t, got), metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("changing forceSynchronization: %v", err)
	}
	if updated.GetGeneration() != gen+1 {
		t.Errorf("generation %d after a new forceSynchronization, want %d", updated.GetGeneration(), gen+1)
	}
}

// fullStatus sets every status field, v0.0.5's and keymount's.
func fullStatus(generation int64) secretsyncv1alpha1.SecretSyncStatus {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	cond := func(typ, reason, msg string) metav1.Condition {
		return metav1.Condition{
			Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: msg,
			ObservedGeneration: generation, LastTransitionTime: now,
		}
	}
	return secretsyncv1alpha1.SecretSyncStatus{
		SyncHash:               "hmac-sha256:0123456789abcdef",
		LastSuccessfulSyncTime: &now,
		Conditions: []metav1.Condition{
			cond(secretsyncv1alpha1.ConditionSecretCreated, secretsyncv1alpha1.ReasonCreateSuccessful, secretsyncv1alpha1.MessageCreateSuccessful),
			cond(secretsyncv1alpha1.ConditionSecretUpdated, secretsyncv1alpha1.ReasonSecretUpToDate, secretsyncv1alpha1.MessageSecretUpToDate),
			cond(secretsyncv1alpha1.ConditionReady, secretsyncv1alpha1.ReasonSecretUpToDate, secretsyncv1alpha1.MessageSecretUpToDate),
		},
		ObservedGeneration: generation,
		Objects:            []secretsyncv1alpha1.SecretSyncObject{{ID: "foo", Version: "v1"}, {ID: "bar"}},
		HandledRefresh:     "2026-11-26T14:00:00Z",
	}
}

// testStatus: status is a subresource, as in v0.0.5: written through it,
// every field (keymount's extras included) is stored as sent and the
// generation stays; written with the object, it is ignored. Conditions are
// a map keyed by type, at most 16, as v0.0.5's.
func (c cluster) testStatus(t *testing.T) {
	ns := c.namespace(t)
	res := c.dyn.Resource(secretSyncs).Namespace(ns)
	created, err := c.create(t, ns, "accepted/sse2esecret.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ss := fromUnstructured(t, created)
	ss.Status = fullStatus(ss.Generation)
	stored, err := res.UpdateStatus(t.Context(), toUnstructured(t, ss), metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("writing status: %v", err)
	}
	got := fromUnstructured(t, stored)
	if diff := cmp.Diff(ss.Status, got.Status); diff != "" {
		t.Errorf("stored status (-sent +stored):\n%s", diff)
	}
	if got.Generation != ss.Generation {
		t.Errorf("generation %d after a status write, want %d", got.Generation, ss.Generation)
	}

	c.checkPrinterColumns(t, ns, ss.Name)

	// Status through the main resource is ignored.
	got.Status.SyncHash = "changed"
	after, err := res.Update(t.Context(), toUnstructured(t, got), metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := unstructured.NestedString(after.Object, "status", "syncHash"); h != ss.Status.SyncHash {
		t.Errorf("syncHash %q after an update of the object, want the status subresource's %q", h, ss.Status.SyncHash)
	}

	// Conditions: each type once, at most 16.
	dup := fromUnstructured(t, after)
	dup.Status.Conditions = append(dup.Status.Conditions, dup.Status.Conditions[0])
	if _, err := res.UpdateStatus(t.Context(), toUnstructured(t, dup), metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "status.conditions[3]: Duplicate value") {
		t.Errorf("a condition type twice: err %v, want a Duplicate value", err)
	}
	many := fromUnstructured(t, after)
	for i := len(many.Status.Conditions); i < 17; i++ {
		extra := many.Status.Conditions[0]
		extra.Type = fmt.Sprintf("Extra%d", i)
		many.Status.Conditions = append(many.Status.Conditions, extra)
	}
	if _, err := res.UpdateStatus(t.Context(), toUnstructured(t, many), metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "status.conditions: Too many: 17: must have at most 16 items") {
		t.Errorf("17 conditions: err %v, want at most 16", err)
	}
}

// checkPrinterColumns: kubectl get shows keymount's columns, Ready and its
// reason from the Ready condition.
func (c cluster) checkPrinterColumns(t *testing.T, ns, name string) {
	t.Helper()
	var table metav1.Table
	err := c.kube.CoreV1().RESTClient().Get().AbsPath("/apis", secretsyncv1alpha1.GroupName, secretsyncv1alpha1.Version,
		"namespaces", ns, secretsyncv1alpha1.Resource, name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(t.Context()).Into(&table)
	if err != nil {
		t.Fatalf("kubectl get's table: %v", err)
	}
	var cols []string
	for _, col := range table.ColumnDefinitions {
		cols = append(cols, col.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Class", "Ready", "Reason", "Synced", "Age"}, cols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(cols) {
		t.Fatalf("rows %+v, want one of %d cells", table.Rows, len(cols))
	}
	var got []string
	for _, cell := range table.Rows[0].Cells[:4] {
		got = append(got, fmt.Sprint(cell))
	}
	want := []string{name, "e2e-providerspc", "True", secretsyncv1alpha1.ReasonSecretUpToDate}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}
