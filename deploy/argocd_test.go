package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/keymount/keymount/rotation"
)

const (
	argoHealthKey  = "resource.customizations.health.secrets-store.csi.x-k8s.io_SecretProviderClassPodStatus"
	argoActionsKey = "resource.customizations.actions.secrets-store.csi.x-k8s.io_SecretProviderClass"
)

// argoCM is the shipped argocd-cm patch.
func argoCM(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("argocd/argocd-cm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(data, &cm); err != nil {
		t.Fatalf("argocd/argocd-cm.yaml: %v", err)
	}
	if cm.Name != "argocd-cm" {
		t.Fatalf("the ConfigMap is %q; Argo CD reads its customizations from argocd-cm", cm.Name)
	}
	return cm.Data
}

// runLua runs script as Argo CD does: the object as the global obj, the
// base, table, string, math and os libraries; it returns what the script
// returns, as JSON-shaped Go values.
func runLua(t *testing.T, script string, obj map[string]any) any {
	t.Helper()
	ls := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer ls.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath}, {lua.OsLibName, lua.OpenOs},
	} {
		ls.Push(ls.NewFunction(lib.open))
		ls.Push(lua.LString(lib.name))
		ls.Call(1, 0)
	}
	ls.SetGlobal("obj", toLua(ls, obj))
	if err := ls.DoString(script); err != nil {
		t.Fatalf("lua: %v\nscript:\n%s", err, script)
	}
	return fromLua(ls.Get(-1))
}

func toLua(ls *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		t := ls.NewTable()
		for _, e := range v {
			t.Append(toLua(ls, e))
		}
		return t
	case map[string]any:
		t := ls.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(ls, e))
		}
		return t
	}
	panic(fmt.Sprintf("toLua: %T", v))
}

func fromLua(v lua.LValue) any {
	switch v := v.(type) {
	case lua.LBool:
		return bool(v)
	case lua.LNumber:
		return float64(v)
	case lua.LString:
		return string(v)
	case *lua.LTable:
		if n := v.Len(); n > 0 {
			out := make([]any, 0, n)
			for i := 1; i <= n; i++ {
				out = append(out, fromLua(v.RawGetInt(i)))
			}
			return out
		}
		out := map[string]any{}
		v.ForEach(func(k, e lua.LValue) { out[k.String()] = fromLua(e) })
		return out
	}
	return nil
}

func luaObject(t *testing.T, js string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// podStatus is a SecretProviderClassPodStatus with the given status JSON.
func podStatus(status string) string {
	s := `{"apiVersion":"secrets-store.csi.x-k8s.io/v1","kind":"SecretProviderClassPodStatus",` +
		`"metadata":{"name":"web-1-prod-db","namespace":"prod"}`
	if status != "" {
		s += `,"status":` + status
	}
	return s + "}"
}

func cond(typ, status, reason string, gen int, message string) string {
	return fmt.Sprintf(`{"type":%q,"status":%q,"reason":%q,"observedGeneration":%d,"message":%q,"lastTransitionTime":"2026-01-01T00:00:00Z"}`,
		typ, status, reason, gen, message)
}

func TestArgoCDHealth(t *testing.T) {
	script := argoCM(t)[argoHealthKey]
	if script == "" {
		t.Fatalf("argocd-cm has no %s", argoHealthKey)
	}
	mounted3, current3 := cond("Mounted", "True", "Mounted", 3, ""), cond("Current", "True", "Refreshed", 3, "")
	for _, tc := range []struct {
		name, obj, status, message string
	}{
		{"no status yet", podStatus(""), "Progressing", "waiting for the volume to be mounted"},
		{"not mounted", podStatus(`{"mounted":false}`), "Progressing", "waiting for the volume to be mounted"},
		{"mounted and current", podStatus(`{"mounted":true,"observedGeneration":3,"conditions":[` + mounted3 + `,` + current3 + `]}`),
			"Healthy", "mounted and current for generation 3 of the class"},
		{"synced too", podStatus(`{"mounted":true,"observedGeneration":3,"conditions":[` + mounted3 + `,` + current3 + `,` +
			cond("SecretsSynced", "True", "Synced", 3, "") + `]}`), "Healthy", "generation 3"},
		{"refresh failed", podStatus(`{"mounted":true,"observedGeneration":3,"conditions":[` + mounted3 + `,` +
			cond("Current", "False", "RefreshFailed", 3, "provider aws: AccessDenied") + `]}`),
			"Degraded", "refresh failed (RefreshFailed): provider aws: AccessDenied"},
		{"sync failed", podStatus(`{"mounted":true,"observedGeneration":3,"conditions":[` + mounted3 + `,` + current3 + `,` +
			cond("SecretsSynced", "False", "SecretNotManaged", 3, `Secret "db" exists`) + `]}`),
			"Degraded", `Secret sync failed (SecretNotManaged): Secret "db" exists`},
		{"new generation not mounted yet", podStatus(`{"mounted":true,"observedGeneration":4,"conditions":[` + mounted3 + `,` + current3 + `]}`),
			"Progressing", "generation 4 of the class is not mounted yet"},
		{"upstream driver's status (no conditions)", podStatus(`{"mounted":true,"podName":"web-1","secretProviderClassName":"db"}`),
			"Healthy", "mounted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := runLua(t, script, luaObject(t, tc.obj)).(map[string]any)
			if !ok {
				t.Fatalf("the health script returned %v, want a table", got)
			}
			if got["status"] != tc.status || !strings.Contains(fmt.Sprint(got["message"]), tc.message) {
				t.Errorf("health = %v %q, want %s with %q", got["status"], got["message"], tc.status, tc.message)
			}
		})
	}
}

func TestArgoCDRefreshAction(t *testing.T) {
	var actions struct {
		Discovery   string `json:"discovery.lua"`
		Definitions []struct {
			Name   string `json:"name"`
			Action string `json:"action.lua"`
		} `json:"definitions"`
	}
	if err := yaml.UnmarshalStrict([]byte(argoCM(t)[argoActionsKey]), &actions); err != nil {
		t.Fatalf("%s: %v", argoActionsKey, err)
	}
	class := luaObject(t, `{"apiVersion":"secrets-store.csi.x-k8s.io/v1","kind":"SecretProviderClass",`+
		`"metadata":{"name":"db","namespace":"prod","annotations":{"team":"payments","`+rotation.RefreshAnnotation+`":"2020-01-01T00:00:00Z"}},`+
		`"spec":{"provider":"aws","parameters":{"objects":"- objectName: db"}}}`)
	discovered, ok := runLua(t, actions.Discovery, class).(map[string]any)
	if !ok || discovered["refresh"] == nil {
		t.Fatalf("discovery.lua offers %v, want refresh", discovered)
	}
	if len(actions.Definitions) != 1 || actions.Definitions[0].Name != "refresh" {
		t.Fatalf("definitions %+v, want refresh only", actions.Definitions)
	}
	before := time.Now().UTC().Truncate(time.Second)
	got, ok := runLua(t, actions.Definitions[0].Action, class).(map[string]any)
	if !ok {
		t.Fatalf("action.lua returned %v, want the object", got)
	}
	meta, _ := got["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	stamp, _ := annotations[rotation.RefreshAnnotation].(string)
	at, err := time.Parse(time.RFC3339, stamp)
	if err != nil || at.Before(before) {
		t.Errorf("%s = %q (%v), want the current time, a new value", rotation.RefreshAnnotation, stamp, err)
	}
	if annotations["team"] != "payments" || got["spec"] == nil {
		t.Errorf("the action changed more than the annotation: %v", got)
	}
	// A class without annotations gets them.
	bare := luaObject(t, `{"apiVersion":"secrets-store.csi.x-k8s.io/v1","kind":"SecretProviderClass","metadata":{"name":"db"}}`)
	got, _ = runLua(t, actions.Definitions[0].Action, bare).(map[string]any)
	meta, _ = got["metadata"].(map[string]any)
	if annotations, _ := meta["annotations"].(map[string]any); annotations[rotation.RefreshAnnotation] == nil {
		t.Errorf("a class without annotations: %v, want the refresh annotation", meta)
	}
}
