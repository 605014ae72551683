package conformance_test

import (
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

	err := h.Publish(t.Context(), v, "no-such-class", false)

	assertCode(t, err, codes.FailedPrecondition, `"no-such-class"`)
	assertUntouched(t, h, v)
}

func TestPublishMissingProvider(t *testing.T) {
	h := startApp(t)
	h.WriteClassFor("vault-db", "vault", map[string]string{"roleName": "db"})
	v := h.NewVolume("secrets")

	err := h.Publish(t.Context(), v, "vault-db", false)

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

			err := h.Publish(t.Context(), v, "broken", false)

			assertCode(t, err, tt.code, tt.mention...)
			assertUntouched(t, h, v)

			// The same volume publishes fine once the class is fixed.
			h.WriteClass("broken", appObjects)
			publish(t, h, v, "broken", false)
			assertFiles(t, v.Target, appFiles("v1"))
		})
	}
}

func TestPublishInvalidArgument(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	valid := func() *csi.NodePublishVolumeRequest { return h.PublishRequest(v.ID, v.Target, appClass, false) }
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
		{"no volume context", func(r *csi.NodePublishVolumeRequest) { r.VolumeContext = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := valid()
			tt.mutate(req)
			_, err := h.Node.NodePublishVolume(t.Context(), req)
			assertCode(t, err, codes.InvalidArgument)
			assertUntouched(t, h, v)
		})
	}
	// The unmutated request works: the table tests what it says.
	publish(t, h, v, appClass, false)
	assertFiles(t, v.Target, appFiles("v1"))
}

func TestUnpublishInvalidArgument(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass, false)
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
			assertPublished(t, h, v, false)
		})
	}
}

func TestNodeGetVolumeStatsInvalidArgument(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass, false)
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
