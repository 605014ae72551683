package driver

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// syncingClass is a class with parameters that syncs a Secret, or (sync
// false) the same class without secretObjects.
func syncingClass(sync bool) *secretsstorev1.SecretProviderClass {
	c := &secretsstorev1.SecretProviderClass{Spec: secretsstorev1.SecretProviderClassSpec{
		Provider:   "local",
		Parameters: map[string]string{"objects": "- objectName: db/password", "region": "eu-west-1"},
	}}
	if sync {
		c.Spec.SecretObjects = []*secretsstorev1.SecretObject{{
			SecretName: "db", Type: "Opaque",
			Data: []*secretsstorev1.SecretObjectData{{ObjectName: "db/password", Key: "password"}},
		}}
	}
	return c
}

// TestPodAttributesOfSyncingClass: a pod's volumeAttributes may not add to
// or override the parameters of a class that syncs Secrets; the error is
// InvalidArgument naming the key and the fix. Kubelet's own keys, the
// class name and a parameter repeated with its value are no change.
func TestPodAttributesOfSyncingClass(t *testing.T) {
	tests := []struct {
		name  string
		attrs map[string]string // added to a valid request's volume context
		want  string            // in the error; "" for accepted
	}{
		{name: "class name and kubelet's keys only"},
		{name: "kubelet's tokens and ephemeral", attrs: map[string]string{AttrTokens: `{}`, AttrEphemeral: "true", AttrServiceAccount: "sa"}},
		{name: "any key under kubelet's prefix", attrs: map[string]string{"csi.storage.k8s.io/objects": "x"}},
		{name: "a parameter repeated with its value", attrs: map[string]string{"region": "eu-west-1"}},
		{
			name: "objects overridden", attrs: map[string]string{"objects": "- objectName: attacker/value"},
			want: `volume attribute "objects" would override parameter "objects" of SecretProviderClass shop/db`,
		},
		{
			name: "region overridden", attrs: map[string]string{"region": "us-east-1"},
			want: `volume attribute "region" would override parameter "region"`,
		},
		{
			name: "a parameter the class does not set", attrs: map[string]string{"vaultAddress": "https://attacker.example"},
			want: `volume attribute "vaultAddress" is not a parameter of SecretProviderClass shop/db`,
		},
		{
			name: "the first offending key in order", attrs: map[string]string{"zz": "1", "objects": "x", "aa": "2"},
			want: `volume attribute "aa"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := validRequest()
			for k, v := range tc.attrs {
				req.VolumeContext[k] = v
			}
			p, err := parsePublishRequest(req, testKubeletRoot)
			if err != nil {
				t.Fatal(err)
			}
			got, err := buildMountRequest(syncingClass(true), p, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("buildMountRequest: %v", err)
				}
				attrs := decodeAttrs(t, got)
				if attrs["objects"] != "- objectName: db/password" || attrs["region"] != "eu-west-1" {
					t.Errorf("attributes %v: the class's parameters must reach the provider", attrs)
				}
				return
			}
			if !errors.Is(err, errInvalidRequest) || status.Code(toStatus(err)) != codes.InvalidArgument {
				t.Fatalf("err = %v, want InvalidArgument", err)
			}
			msg := status.Convert(toStatus(err)).Message()
			for _, s := range []string{tc.want, "spec.secretObjects", "remove", "volumeAttributes"} {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q lacks %q", msg, s)
				}
			}
			for _, v := range tc.attrs {
				if len(v) > 2 && strings.Contains(msg, v) {
					t.Errorf("message %q carries the attribute's value %q", msg, v)
				}
			}
		})
	}
}

// TestPodAttributesOverlayWithoutSync: a class that syncs nothing keeps
// upstream's overlay: the pod's volumeAttributes win over its parameters
// (a key the class does not set is refused: TestUnknownVolumeAttributes).
func TestPodAttributesOverlayWithoutSync(t *testing.T) {
	req := validRequest()
	req.VolumeContext["objects"] = "- objectName: mine"
	req.VolumeContext["region"] = "us-east-1"
	p, err := parsePublishRequest(req, testKubeletRoot)
	if err != nil {
		t.Fatal(err)
	}
	got, err := buildMountRequest(syncingClass(false), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	attrs := decodeAttrs(t, got)
	if attrs["objects"] != "- objectName: mine" || attrs["region"] != "us-east-1" {
		t.Errorf("attributes %v, want the pod's values over the class's", attrs)
	}
}

func decodeAttrs(t *testing.T, m *v1alpha1.MountRequest) map[string]string {
	t.Helper()
	var attrs map[string]string
	if err := json.Unmarshal([]byte(m.GetAttributes()), &attrs); err != nil {
		t.Fatal(err)
	}
	return attrs
}

// TestPublishRefusesPodOverrideOfSyncingClass: through the CSI handler, a
// first publish whose pod overrides a syncing class's parameter fails with
// InvalidArgument before the provider is called or anything is mounted; a
// republish of a mounted volume whose class starts syncing keeps the
// pod's files, calls no provider and records why.
func TestPublishRefusesPodOverrideOfSyncingClass(t *testing.T) {
	n := newTestNode(t)
	writeClass := func(sync bool) {
		spc := "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nmetadata:\n  name: app\n" +
			"spec:\n  provider: scripted\n  parameters:\n    objects: the-class-objects\n"
		if sync {
			spc += "  secretObjects:\n  - secretName: db\n    type: Opaque\n    data:\n    - objectName: good\n      key: good\n"
		}
		if err := os.WriteFile(filepath.Join(n.base, "spc.yaml"), []byte(spc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	publish := func(target string) error {
		req := validRequest()
		req.TargetPath = target
		req.VolumeContext[AttrClass] = "app"
		req.VolumeContext["objects"] = "the-pod-objects"
		req.VolumeId = "csi-" + filepath.Base(filepath.Dir(target))
		_, err := n.srv.NodePublishVolume(t.Context(), req)
		return err
	}
	n.provider.files = []*v1alpha1.File{{Path: "good", Mode: 0o644, Contents: []byte("v1")}}

	writeClass(true)
	target := n.target("refused")
	err := publish(target)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), `parameter "objects"`) {
		t.Fatalf("first publish: %v, want InvalidArgument naming parameter \"objects\"", err)
	}
	if n.provider.calls != 0 {
		t.Errorf("the provider was called %d times, want 0", n.provider.calls)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("target %s left behind: %v", target, err)
	}
	assertNoMountsUnder(t, n.base)

	// The class syncs nothing yet: the pod's overlay is upstream's.
	writeClass(false)
	target = n.target("secrets")
	if err := publish(target); err != nil {
		t.Fatalf("publish with a class that syncs nothing: %v", err)
	}
	calls := n.provider.calls
	writeClass(true)
	n.provider.files = []*v1alpha1.File{{Path: "good", Mode: 0o644, Contents: []byte("v2")}}
	if err := publish(target); err != nil {
		t.Fatalf("republish once the class syncs: %v, want OK (old files kept)", err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "good")); err != nil || string(b) != "v1" {
		t.Errorf("good = %q, %v; want the old value", b, err)
	}
	if n.provider.calls != calls {
		t.Errorf("the provider was called on the refused refresh")
	}
	rec, err := n.srv.d.deps.Volumes.Lookup("csi-secrets").LoadRecord()
	if err != nil || !strings.Contains(rec.LastError, `would override parameter "objects"`) {
		t.Errorf("record = %+v, %v; want the refusal recorded", rec, err)
	}
}
