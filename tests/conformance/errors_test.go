package conformance_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/tests/harness"
)

// assertUntouched checks that a failed first publish left nothing behind:
// no mount, no target directory, no volume directory, no record.
func assertUntouched(t *testing.T, h *harness.Harness, v harness.Volume) {
	t.Helper()
	assertGone(t, h, v)
	assertNoMounts(t, h.Dir)
	if rec, err := h.Record(v.ID); rec != nil || err != nil {
		t.Errorf("record after a failed first publish: %v, %v", rec, err)
	}
}

func TestPublishMissingClass(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")

	err := h.Publish(t.Context(), v, "no-such-class", true)

	assertCode(t, err, codes.FailedPrecondition, `"no-such-class"`)
	assertUntouched(t, h, v)
}

func TestPublishMissingProvider(t *testing.T) {
	h := startApp(t)
	h.WriteClassFor("vault-db", "vault", map[string]string{"roleName": "db"})
	v := h.NewVolume("secrets")

	err := h.Publish(t.Context(), v, "vault-db", true)

	assertCode(t, err, codes.FailedPrecondition, `"vault"`, "vault.sock", h.ProviderDir)
	assertUntouched(t, h, v)
}

// TestFirstPublishFails: the provider fails the first publish after the
// driver mounted the volume; the driver unmounts and cleans up and returns
// the provider's code.
func TestFirstPublishFails(t *testing.T) {
	tests := []struct {
		name    string
		objects string
		code    codes.Code
		mention []string
	}{
		{"missing object", harness.ObjectsYAML("api-token", "no/such/object"), codes.NotFound, []string{"no/such/object"}},
		{"invalid objects parameter", "- objectName: ../outside\n", codes.InvalidArgument, []string{"objectName"}},
		{"object alias clash", "- objectName: api-token\n  objectAlias: a\n- objectName: db/password\n  objectAlias: a\n", codes.InvalidArgument, []string{`"a"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startApp(t)
			h.WriteClass("broken", tt.objects)
			v := h.NewVolume("secrets")

			err := h.Publish(t.Context(), v, "broken", true)

			assertCode(t, err, tt.code, tt.mention...)
			assertUntouched(t, h, v)

			// The same volume publishes fine once the class is fixed.
			h.WriteClass("broken", appObjects)
			publish(t, h, v, "broken")
			assertFiles(t, v.Target, appFiles("v1"))
		})
	}
}

func TestPublishInvalidArgument(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	valid := func() *csi.NodePublishVolumeRequest { return h.PublishRequest(v.ID, v.Target, appClass, true) }
	tests := []struct {
		name   string
		mutate func(r *csi.NodePublishVolumeRequest)
	}{
		{"no volume ID", func(r *csi.NodePublishVolumeRequest) { r.VolumeId = "" }},
		{"no target path", func(r *csi.NodePublishVolumeRequest) { r.TargetPath = "" }},
		{"relative target path", func(r *csi.NodePublishVolumeRequest) { r.TargetPath = "pods/x/mount" }},
		{"unclean target path", func(r *csi.NodePublishVolumeRequest) { r.TargetPath = v.Target + "/../mount" }},
		{"no volume capability", func(r *csi.NodePublishVolumeRequest) { r.VolumeCapability = nil }},
		{"block access", func(r *csi.NodePublishVolumeRequest) {
			r.VolumeCapability.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		}},
		{"no access type", func(r *csi.NodePublishVolumeRequest) { r.VolumeCapability.AccessType = nil }},
		{"no secretProviderClass", func(r *csi.NodePublishVolumeRequest) { delete(r.VolumeContext, driver.AttrClass) }},
		{"no pod name (podInfoOnMount off)", func(r *csi.NodePublishVolumeRequest) { delete(r.VolumeContext, driver.AttrPodName) }},
		{"no pod namespace", func(r *csi.NodePublishVolumeRequest) { delete(r.VolumeContext, driver.AttrPodNamespace) }},
		{"no pod UID", func(r *csi.NodePublishVolumeRequest) { delete(r.VolumeContext, driver.AttrPodUID) }},
		{"no volume context", func(r *csi.NodePublishVolumeRequest) { r.VolumeContext = nil }},
		{"not read-only", func(r *csi.NodePublishVolumeRequest) { r.Readonly = false }},
		{"target of another pod", func(r *csi.NodePublishVolumeRequest) {
			r.VolumeContext[driver.AttrPodUID] = "00000000-0000-4000-8000-000000000001"
		}},
		{"target not ending in mount", func(r *csi.NodePublishVolumeRequest) { r.TargetPath = filepath.Dir(v.Target) + "/target" }},
		{"target outside the kubelet root", func(r *csi.NodePublishVolumeRequest) {
			r.TargetPath = filepath.Join(h.Dir, "elsewhere", strings.TrimPrefix(v.Target, h.TargetBase))
		}},
		{"target below the pod's volume", func(r *csi.NodePublishVolumeRequest) { r.TargetPath = v.Target + "/mount" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := valid()
			tt.mutate(req)
			_, err := h.Node.NodePublishVolume(t.Context(), req)
			assertCode(t, err, codes.InvalidArgument)
			assertUntouched(t, h, v)
			assertNoMounts(t, filepath.Join(h.Dir, "elsewhere"))
		})
	}
	// The unmutated request works: the table tests what it says.
	publish(t, h, v, appClass)
	assertFiles(t, v.Target, appFiles("v1"))
}

// TestPublishWritableRefused: secrets volumes are read-only (as with the
// upstream driver); a publish asking for a writable volume is refused with a
// message telling the user what to set, and nothing is mounted.
func TestPublishWritableRefused(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")

	err := h.Publish(t.Context(), v, appClass, false)

	assertCode(t, err, codes.InvalidArgument, "readOnly: true")
	assertUntouched(t, h, v)
}

// TestPublishThroughSymlinkRefused: the target path is opened without
// following symlinks below the kubelet root. A pod directory replaced by a
// symlink is refused, and nothing is created or mounted where it points.
func TestPublishThroughSymlinkRefused(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	elsewhere := filepath.Join(h.Dir, "elsewhere")
	if err := os.MkdirAll(elsewhere, 0o750); err != nil {
		t.Fatal(err)
	}
	volDir := filepath.Dir(v.Target)
	if err := os.Remove(volDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, volDir); err != nil {
		t.Fatal(err)
	}

	err := h.Publish(t.Context(), v, appClass, true)

	assertCode(t, err, codes.InvalidArgument, "symlink")
	assertNoMounts(t, h.Dir)
	if names := entries(t, elsewhere); len(names) != 0 {
		t.Errorf("%s: the driver created %v through a symlink", elsewhere, names)
	}
	if rec, err := h.Record(v.ID); rec != nil || err != nil {
		t.Errorf("record after a refused publish: %v, %v", rec, err)
	}
}

// TestPublishTooLarge: content larger than one generation may take
// (--tmpfs-size) fails a first publish with ResourceExhausted naming the
// flag, and leaves nothing behind; content that fits publishes.
func TestPublishTooLarge(t *testing.T) {
	page := os.Getpagesize()
	h := harness.Start(t, harness.Options{TmpfsSize: int64(4 * page)})
	h.WriteObject("big", strings.Repeat("x", 4*page+1))
	h.WriteObject("small", strings.Repeat("x", 3*page))
	h.WriteClass("big", harness.ObjectsYAML("big"))
	h.WriteClass("small", harness.ObjectsYAML("small"))
	v := h.NewVolume("secrets")

	err := h.Publish(t.Context(), v, "big", true)

	assertCode(t, err, codes.ResourceExhausted, "--tmpfs-size")
	assertUntouched(t, h, v)

	publish(t, h, v, "small")
	assertFiles(t, v.Target, map[string]file{"small": {strings.Repeat("x", 3*page), 0o644}})
}

func TestUnpublishInvalidArgument(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)
	tests := []struct {
		name string
		req  *csi.NodeUnpublishVolumeRequest
	}{
		{"no volume ID", &csi.NodeUnpublishVolumeRequest{TargetPath: v.Target}},
		{"no target path", &csi.NodeUnpublishVolumeRequest{VolumeId: v.ID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.Node.NodeUnpublishVolume(t.Context(), tt.req)
			assertCode(t, err, codes.InvalidArgument)
			assertPublished(t, h, v)
		})
	}
}

func TestNodeGetVolumeStatsInvalidArgument(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)
	for name, req := range map[string]*csi.NodeGetVolumeStatsRequest{
		"no volume ID":   {VolumePath: v.Target},
		"no volume path": {VolumeId: v.ID},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.Node.NodeGetVolumeStats(t.Context(), req)
			assertCode(t, err, codes.InvalidArgument)
		})
	}
}
