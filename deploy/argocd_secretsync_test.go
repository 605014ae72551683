package deploy_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/rotation"
)

const (
	argoSecretSyncHealthKey  = "resource.customizations.health.secret-sync.x-k8s.io_SecretSync"
	argoSecretSyncActionsKey = "resource.customizations.actions.secret-sync.x-k8s.io_SecretSync"
)

// secretSync is a SecretSync of the sync controller's e2e suite at
// generation gen, with the given status JSON ("" for none).
func secretSync(gen int, status string) string {
	s := fmt.Sprintf(`{"apiVersion":"secret-sync.x-k8s.io/v1alpha1","kind":"SecretSync",`+
		`"metadata":{"name":"sse2esecret","namespace":"default","generation":%d},`+
		`"spec":{"serviceAccountName":"default","secretProviderClassName":"e2e-providerspc",`+
		`"secretObject":{"type":"Opaque","data":[{"sourcePath":"foo","targetKey":"bar"}]}}`, gen)
	if status != "" {
		s += `,"status":` + status
	}
	return s + "}"
}

// syncStatus is a status with conditions, as keymount-controller writes it.
func syncStatus(gen int, conditions ...string) string {
	return fmt.Sprintf(`{"observedGeneration":%d,"syncHash":"3f1c","lastSuccessfulSyncTime":"2026-01-01T00:00:00Z","conditions":[%s]}`,
		gen, strings.Join(conditions, ","))
}

// TestArgoCDSecretSyncHealth: the SecretSync health script, against a
// SecretSync in every state keymount-controller (or the sync controller
// v0.0.5, which writes no Ready) leaves it in.
func TestArgoCDSecretSyncHealth(t *testing.T) {
	script := argoCM(t)[argoSecretSyncHealthKey]
	if script == "" {
		t.Fatalf("argocd-cm has no %s", argoSecretSyncHealthKey)
	}
	created2 := cond("SecretCreated", "True", "CreateSuccessful", 2, "")
	for _, tc := range []struct {
		name, obj, status, message string
	}{
		{"no status (before the first sync)", secretSync(1, ""), "Progressing", "waiting for the first sync"},
		{"empty status", secretSync(1, `{}`), "Progressing", "waiting for the first sync"},
		{"Ready=True for the current generation", secretSync(2, syncStatus(2, created2, cond("Ready", "True", "Synced", 2, "Secret sse2esecret holds 1 key"))),
			"Healthy", "Secret synced for generation 2: Secret sse2esecret holds 1 key"},
		{"Ready=True for an older generation", secretSync(3, syncStatus(2, created2, cond("Ready", "True", "Synced", 2, ""))),
			"Progressing", "generation 3 is not synced yet"},
		{"Ready=True without observedGeneration, generation 2", secretSync(2, `{"conditions":[{"type":"Ready","status":"True","reason":"Synced","message":""}]}`),
			"Progressing", "generation 2 is not synced yet"},
		{"Ready=False", secretSync(2, syncStatus(2, created2, cond("Ready", "False", "RemoteSecretStoreFetchFailed", 2, "provider aws: AccessDeniedException"))),
			"Degraded", "not synced (RemoteSecretStoreFetchFailed): provider aws: AccessDeniedException"},
		{"Ready=False for an older generation", secretSync(3, syncStatus(2, cond("Ready", "False", "ProviderError", 2, "unreachable"))),
			"Progressing", "generation 3 is not synced yet"},
		{"Ready=Unknown", secretSync(2, syncStatus(2, cond("Ready", "Unknown", "Syncing", 2, "calling provider aws"))),
			"Progressing", "syncing (Syncing): calling provider aws"},
		{"SecretCreated=False with a v0.0.5 reason, no Ready", secretSync(1, `{"conditions":[`+
			`{"type":"SecretCreated","status":"False","reason":"SecretProviderClassMisconfigured","message":"SecretProviderClass e2e-providerspc not found","lastTransitionTime":"2026-01-01T00:00:00Z"}]}`),
			"Degraded", "SecretCreated=False (SecretProviderClassMisconfigured): SecretProviderClass e2e-providerspc not found"},
		{"SecretUpdated=False beside an older Ready=True", secretSync(2, syncStatus(2, created2,
			cond("SecretUpdated", "False", "ControllerPatchError", 2, "Secret sse2esecret exists and is not owned by SecretSync sse2esecret"),
			cond("Ready", "True", "Synced", 1, ""))),
			"Degraded", "SecretUpdated=False (ControllerPatchError): Secret sse2esecret exists and is not owned by SecretSync sse2esecret"},
		{"the sync controller's success, no Ready", secretSync(1, `{"conditions":[`+
			`{"type":"SecretCreated","status":"True","reason":"CreateSuccessful","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}`),
			"Progressing", "waiting for the first sync"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := runLua(t, script, luaObject(t, tc.obj)).(map[string]any)
			if !ok {
				t.Fatalf("the health script returned %v, want a table", got)
			}
			if got["status"] != tc.status || got["message"] != tc.message {
				t.Errorf("health = %v %q, want %s %q", got["status"], got["message"], tc.status, tc.message)
			}
		})
	}
}

// TestArgoCDSecretSyncRefreshAction: the refresh action sets
// keymount.io/refresh to the current time (a new value, the manual
// trigger) and changes nothing else; a SecretSync without annotations gets
// them.
func TestArgoCDSecretSyncRefreshAction(t *testing.T) {
	var actions struct {
		Discovery   string `json:"discovery.lua"`
		Definitions []struct {
			Name   string `json:"name"`
			Action string `json:"action.lua"`
		} `json:"definitions"`
	}
	if err := yaml.UnmarshalStrict([]byte(argoCM(t)[argoSecretSyncActionsKey]), &actions); err != nil {
		t.Fatalf("%s: %v", argoSecretSyncActionsKey, err)
	}
	discovered, ok := runLua(t, actions.Discovery, luaObject(t, secretSync(1, ""))).(map[string]any)
	if !ok || discovered["refresh"] == nil {
		t.Fatalf("discovery.lua offers %v, want refresh", discovered)
	}
	if len(actions.Definitions) != 1 || actions.Definitions[0].Name != "refresh" {
		t.Fatalf("definitions %+v, want refresh only", actions.Definitions)
	}
	obj := luaObject(t, secretSync(2, syncStatus(2, cond("Ready", "True", "Synced", 2, ""))))
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		t.Fatalf("the SecretSync has no metadata: %v", obj)
	}
	meta["annotations"] = map[string]any{"team": "payments", rotation.RefreshAnnotation: "2020-01-01T00:00:00Z"}
	want := luaObject(t, secretSync(2, syncStatus(2, cond("Ready", "True", "Synced", 2, ""))))
	before := time.Now().UTC().Truncate(time.Second)
	got, ok := runLua(t, actions.Definitions[0].Action, obj).(map[string]any)
	if !ok {
		t.Fatalf("action.lua returned %v, want the object", got)
	}
	gotMeta, _ := got["metadata"].(map[string]any)
	annotations, _ := gotMeta["annotations"].(map[string]any)
	stamp, _ := annotations[rotation.RefreshAnnotation].(string)
	if at, err := time.Parse(time.RFC3339, stamp); err != nil || at.Before(before) {
		t.Errorf("%s = %q (%v), want the current time, a new value", rotation.RefreshAnnotation, stamp, err)
	}
	if len(annotations) != 2 || annotations["team"] != "payments" {
		t.Errorf("annotations %v, want team kept and the refresh annotation", annotations)
	}
	delete(gotMeta, "annotations")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the action changed more than the annotation:\n got %v\nwant %v", got, want)
	}
	bare, _ := runLua(t, actions.Definitions[0].Action, luaObject(t, secretSync(1, ""))).(map[string]any)
	bareMeta, _ := bare["metadata"].(map[string]any)
	if a, _ := bareMeta["annotations"].(map[string]any); a[rotation.RefreshAnnotation] == nil {
		t.Errorf("a SecretSync without annotations: %v, want the refresh annotation", bareMeta)
	}
}

// syncWave returns the Argo CD sync wave of an object's annotations (0 when
// unset, as Argo CD reads it).
func syncWave(t *testing.T, annotations map[string]string) int {
	t.Helper()
	w, ok := annotations["argocd.argoproj.io/sync-wave"]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(w)
	if err != nil {
		t.Fatalf("sync wave %q: %v", w, err)
	}
	return n
}

// TestArgoCDSyncWaveExample: examples/argocd/app.yaml, the pattern
// docs/argocd.md documents, puts the class and the SecretSync in an earlier
// wave than the Deployment that reads the SecretSync's Secret through
// envFrom, all in one namespace, the SecretSync naming the class.
func TestArgoCDSyncWaveExample(t *testing.T) {
	data, err := os.ReadFile("../examples/argocd/app.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var (
		spc  secretsstorev1.SecretProviderClass
		sync struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata"`
			Spec              struct {
				ServiceAccountName      string `json:"serviceAccountName"`
				SecretProviderClassName string `json:"secretProviderClassName"`
				SecretObject            struct {
					Type string `json:"type"`
					Data []struct {
						SourcePath string `json:"sourcePath"`
						TargetKey  string `json:"targetKey"`
					} `json:"data"`
				} `json:"secretObject"`
			} `json:"spec"`
		}
		deploy appsv1.Deployment
	)
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 3 {
		t.Fatalf("%d documents, want the class, the SecretSync and the Deployment", len(docs))
	}
	for i, target := range []any{&spc, &sync, &deploy} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), target); err != nil {
			t.Fatalf("document %d: %v", i+1, err)
		}
	}
	if sync.Kind != "SecretSync" || sync.APIVersion != "secret-sync.x-k8s.io/v1alpha1" || spc.Kind != "SecretProviderClass" {
		t.Fatalf("kinds %s %s, %s %s", spc.Kind, spc.APIVersion, sync.Kind, sync.APIVersion)
	}
	if syncWave(t, sync.Annotations) >= syncWave(t, deploy.Annotations) || syncWave(t, spc.Annotations) > syncWave(t, sync.Annotations) {
		t.Errorf("waves: class %d, SecretSync %d, Deployment %d; want the Deployment after the other two",
			syncWave(t, spc.Annotations), syncWave(t, sync.Annotations), syncWave(t, deploy.Annotations))
	}
	if sync.Namespace != deploy.Namespace || spc.Namespace != sync.Namespace || sync.Spec.SecretProviderClassName != spc.Name {
		t.Errorf("SecretSync %s/%s of class %s, class %s/%s, Deployment in %s", sync.Namespace, sync.Name,
			sync.Spec.SecretProviderClassName, spc.Namespace, spc.Name, deploy.Namespace)
	}
	c := deploy.Spec.Template.Spec.Containers
	if len(c) != 1 || len(c[0].EnvFrom) != 1 || c[0].EnvFrom[0].SecretRef == nil || c[0].EnvFrom[0].SecretRef.Name != sync.Name {
		t.Errorf("the Deployment's container %+v, want envFrom the Secret %s", c, sync.Name)
	}
	if len(sync.Spec.SecretObject.Data) == 0 || sync.Spec.ServiceAccountName != deploy.Spec.Template.Spec.ServiceAccountName {
		t.Errorf("SecretSync spec %+v, want data and the Deployment's service account", sync.Spec)
	}
}
