package deploy_test

import (
	"fmt"
	"testing"
)

const argoSecretMirrorHealthKey = "resource.customizations.health.mirrors.kts.studio_SecretMirror"

// secretMirror is mirrors' README SecretMirror at generation gen, with the
// given status JSON ("" for none).
func secretMirror(gen int, status string) string {
	s := fmt.Sprintf(`{"apiVersion":"mirrors.kts.studio/v1alpha2","kind":"SecretMirror",`+
		`"metadata":{"name":"mysecret","namespace":"default","generation":%d},`+
		`"spec":{"source":{"name":"mysecret"},"destination":{"namespaces":["demo-namespace-\\d+"]}}`, gen)
	if status != "" {
		s += `,"status":` + status
	}
	return s + "}"
}

// TestArgoCDSecretMirrorHealth: the SecretMirror health script, against a
// SecretMirror in every state keymount-controller (or mirrors, which writes
// neither message nor observedGeneration) leaves it in.
func TestArgoCDSecretMirrorHealth(t *testing.T) {
	script := argoCM(t)[argoSecretMirrorHealthKey]
	if script == "" {
		t.Fatalf("argocd-cm has no %s", argoSecretMirrorHealthKey)
	}
	for _, tc := range []struct {
		name, obj, status, message string
	}{
		{"no status", secretMirror(1, ""), "Progressing", "waiting for the first sync"},
		{"empty status", secretMirror(1, `{}`), "Progressing", "waiting for the first sync"},
		{"Active", secretMirror(2, `{"mirrorStatus":"Active","lastSyncTime":"2026-01-01T00:00:00Z","observedGeneration":2,"message":"Secret default/mysecret copied to 3 namespaces"}`),
			"Healthy", "Secret default/mysecret copied to 3 namespaces"},
		{"Active, written by mirrors", secretMirror(2, `{"mirrorStatus":"Active","lastSyncTime":"2026-01-01T00:00:00Z"}`),
			"Healthy", "copies in step"},
		{"Active for an older generation", secretMirror(3, `{"mirrorStatus":"Active","observedGeneration":2,"message":"copied"}`),
			"Progressing", "generation 3 is not synced yet"},
		{"Pending", secretMirror(1, `{"mirrorStatus":"Pending","observedGeneration":1,"message":"Secret default/mysecret not found, waiting to appear"}`),
			"Progressing", "Secret default/mysecret not found, waiting to appear"},
		{"Pending, written by mirrors", secretMirror(1, `{"mirrorStatus":"Pending"}`), "Progressing", "mirrorStatus Pending"},
		{"Error", secretMirror(1, `{"mirrorStatus":"Error","observedGeneration":1,"message":"Vault sources and destinations need keymount's Vault provider (issue 22), not available yet"}`),
			"Degraded", "Vault sources and destinations need keymount's Vault provider (issue 22), not available yet"},
		{"Error, written by mirrors", secretMirror(1, `{"mirrorStatus":"Error"}`), "Degraded", "mirrorStatus Error"},
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
