package hostile_test

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/tests/harness"
)

// syncingClassManifest is a class of the harness's local provider that
// mounts db/password as password and syncs it into the Secret db.
const syncingClassManifest = `apiVersion: secrets-store.csi.x-k8s.io/v1
kind: SecretProviderClass
metadata:
  name: synced
spec:
  provider: local
  parameters:
    objects: |
      - objectName: db/password
        objectAlias: password
  secretObjects:
  - secretName: db
    type: Opaque
    data:
    - objectName: password
      key: password
`

// TestPodAuthorCannotRedirectSyncingClass: a pod author puts keys into the
// pod volume's volumeAttributes, which kubelet passes in the volume context
// beside its own. Against a class that syncs a Secret other workloads read,
// overriding the class's objects (to a file the author chose) or adding a
// parameter is refused with InvalidArgument naming the key, before the
// provider is asked and with nothing left on the node; the class's own
// volumes still get the class's files, and a class that syncs nothing keeps
// upstream's overlay.
func TestPodAuthorCannotRedirectSyncingClass(t *testing.T) {
	h := harness.Start(t, harness.Options{})
	h.WriteObject("db/password", "the-class-password")
	h.WriteObject("scratch/planted", "the-author-s-value")
	if err := os.WriteFile(filepath.Join(h.ClassDir, "synced.yaml"), []byte(syncingClassManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	hijack := "- objectName: scratch/planted\n  objectAlias: password\n"
	h.WriteClass("plain", "- objectName: db/password\n  objectAlias: password\n")

	for _, tc := range []struct {
		name  string
		attrs map[string]string
		want  []string
	}{
		{name: "override", attrs: map[string]string{"objects": hijack}, want: []string{`volume attribute "objects" would override parameter "objects"`, "synced"}},
		{name: "addition", attrs: map[string]string{"objects": "- objectName: db/password\n  objectAlias: password\n", "root": "/"},
			want: []string{`volume attribute "root" is not a parameter`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := h.NewVolume("secrets")
			req := h.PublishRequest(v.ID, v.Target, "synced", true)
			for k, val := range tc.attrs {
				req.VolumeContext[k] = val
			}
			_, err := h.Node.NodePublishVolume(t.Context(), req)
			assertCode(t, err, codes.InvalidArgument, tc.want...)
			assertNotPublished(t, h, v)
			if _, err := os.Lstat(v.Target); !os.IsNotExist(err) {
				t.Errorf("target left behind: %v", err)
			}
		})
	}

	// The class's own volumes: the class's file.
	v := h.NewVolume("secrets")
	if err := h.Publish(t.Context(), v, "synced", true); err != nil {
		t.Fatalf("publish of the syncing class without attributes: %v", err)
	}
	assertShows(t, v.Target, map[string]string{"password": "the-class-password"})
	if err := h.Unpublish(t.Context(), v); err != nil {
		t.Fatal(err)
	}

	// A class that syncs nothing: the pod's overlay wins, for its own volume.
	own := h.NewVolume("secrets")
	req := h.PublishRequest(own.ID, own.Target, "plain", true)
	req.VolumeContext["objects"] = hijack
	if _, err := h.Node.NodePublishVolume(t.Context(), req); err != nil {
		t.Fatalf("publish overriding a class that syncs nothing: %v", err)
	}
	assertShows(t, own.Target, map[string]string{"password": "the-author-s-value"})
	if err := h.Unpublish(t.Context(), own); err != nil {
		t.Fatal(err)
	}
	assertStateEmpty(t, h)
}
