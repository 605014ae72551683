package syncrequest

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/keymount/keymount/provider/v1alpha1"
)

const tokensJSON = `{"vault":{"token":"secret-token-x","expirationTimestamp":"2026-11-26T12:10:00Z"}}`

func controllerPod() Pod {
	return Pod{Name: "keymount-controller-7d9f-abcde", Namespace: "keymount-system", UID: "5e0c3c1c-0000-4000-8000-000000000001"}
}

// TestBuildExactRequest: the attributes, secrets, permission and target
// path are what secrets-store-sync-controller v0.0.5 sends.
func TestBuildExactRequest(t *testing.T) {
	req, err := Build(Input{
		Parameters:         map[string]string{"objects": "- objectName: db\n", "region": "eu-west-1"},
		Namespace:          "team-a",
		ServiceAccountName: "app",
		Pod:                controllerPod(),
		Tokens:             tokensJSON,
		Current:            map[string]string{"b": "2", "a": "1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var attrs map[string]string
	if err := json.Unmarshal([]byte(req.GetAttributes()), &attrs); err != nil {
		t.Fatal(err)
	}
	wantAttrs := map[string]string{
		"objects":                                  "- objectName: db\n",
		"region":                                   "eu-west-1",
		"csi.storage.k8s.io/pod.name":              "keymount-controller-7d9f-abcde",
		"csi.storage.k8s.io/pod.uid":               "5e0c3c1c-0000-4000-8000-000000000001",
		"csi.storage.k8s.io/pod.namespace":         "team-a",
		"csi.storage.k8s.io/serviceAccount.name":   "app",
		"csi.storage.k8s.io/serviceAccount.tokens": tokensJSON,
	}
	if d := cmp.Diff(wantAttrs, attrs); d != "" {
		t.Errorf("attributes (-want +got):\n%s", d)
	}
	want := &v1alpha1.MountRequest{
		Attributes: req.GetAttributes(),
		Secrets:    "{}",
		TargetPath: "/mnt/secrets-store",
		Permission: "420",
		CurrentObjectVersion: []*v1alpha1.ObjectVersion{
			{Id: "a", Version: "1"}, {Id: "b", Version: "2"},
		},
	}
	if d := cmp.Diff(want, req, protocmp.Transform()); d != "" {
		t.Errorf("request (-want +got):\n%s", d)
	}
	if Permission != strconv.Itoa(0o644) {
		t.Errorf("Permission %s is not the JSON of 0644", Permission)
	}
}

// TestBuildDefaults: no audiences, no pod environment and a first sync
// send no tokens key, empty pod keys and no object versions.
func TestBuildDefaults(t *testing.T) {
	req, err := Build(Input{Namespace: "ns", ServiceAccountName: "sa", Pod: PodFromEnv(func(string) string { return "" })})
	if err != nil {
		t.Fatal(err)
	}
	var attrs map[string]string
	if err := json.Unmarshal([]byte(req.GetAttributes()), &attrs); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		AttrPodName: "", AttrPodUID: "", AttrPodNamespace: "ns", AttrServiceAccountName: "sa",
	}
	if d := cmp.Diff(want, attrs); d != "" {
		t.Errorf("attributes (-want +got):\n%s", d)
	}
	if req.GetCurrentObjectVersion() != nil {
		t.Errorf("current object versions %v, want none", req.GetCurrentObjectVersion())
	}
}

// TestClassCannotForgeKubeletKeys: class parameters named like kubelet's
// keys never reach the provider, whether the controller sets that key or
// not.
func TestClassCannotForgeKubeletKeys(t *testing.T) {
	params := map[string]string{
		AttrTokens:                     `{"vault":{"token":"forged"}}`,
		AttrPodName:                    "victim",
		AttrServiceAccountName:         "admin",
		"csi.storage.k8s.io/ephemeral": "true",
		"csi.storage.k8s.io/pod.uid":   "forged-uid",
		"usePodIdentity":               "false",
	}
	attrs, err := Attributes(Input{Parameters: params, Namespace: "ns", ServiceAccountName: "sa", Pod: controllerPod()})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"usePodIdentity":       "false",
		AttrPodName:            controllerPod().Name,
		AttrPodUID:             controllerPod().UID,
		AttrPodNamespace:       "ns",
		AttrServiceAccountName: "sa",
	}
	if d := cmp.Diff(want, attrs); d != "" {
		t.Errorf("attributes (-want +got):\n%s", d)
	}
}

func TestBuildErrors(t *testing.T) {
	for name, in := range map[string]Input{
		"no namespace":       {ServiceAccountName: "sa"},
		"no service account": {Namespace: "ns"},
		"tokens not JSON":    {Namespace: "ns", ServiceAccountName: "sa", Tokens: "secret-token-x"},
		"tokens not object":  {Namespace: "ns", ServiceAccountName: "sa", Tokens: `["secret-token-x"]`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Build(in)
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), "secret-token-x") {
				t.Errorf("error %q quotes the tokens", err)
			}
		})
	}
}

func TestPodFromEnv(t *testing.T) {
	env := map[string]string{EnvPodName: "p", EnvPodNamespace: "n", EnvPodUID: "u"}
	if got := PodFromEnv(func(k string) string { return env[k] }); got != (Pod{Name: "p", Namespace: "n", UID: "u"}) {
		t.Errorf("PodFromEnv = %+v", got)
	}
	want := map[string]string{EnvPodName: "SYNC_CONTROLLER_POD_NAME", EnvPodUID: "SYNC_CONTROLLER_POD_UID", EnvPodNamespace: "SYNC_CONTROLLER_POD_NAMESPACE"}
	for k, v := range want {
		if k != v {
			t.Errorf("env %s, want the sync controller's %s", k, v)
		}
	}
}

func TestInputStringHidesTokens(t *testing.T) {
	s := Input{Namespace: "ns", ServiceAccountName: "sa", Tokens: tokensJSON}.String()
	if strings.Contains(s, "secret-token-x") || !strings.Contains(s, "tokens: true") {
		t.Errorf("String() = %q", s)
	}
}
