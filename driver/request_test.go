package driver

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/provider/v1alpha1"
)

func mountCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY},
	}
}

// testKubeletRoot is the kubelet root of the request tests.
const testKubeletRoot = "/var/lib/kubelet"

func validRequest() *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{
		VolumeId:         "csi-abc",
		TargetPath:       "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/secrets/mount",
		VolumeCapability: mountCap(),
		Readonly:         true,
		VolumeContext: map[string]string{
			AttrClass:        "db",
			AttrPodName:      "web-0",
			AttrPodNamespace: "shop",
			AttrPodUID:       "uid",
		},
	}
}

func TestParsePublishRequest(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*csi.NodePublishVolumeRequest)
		want   string // substring of the error; "" means valid
	}{
		{"valid", func(*csi.NodePublishVolumeRequest) {}, ""},
		{"no volume id", func(r *csi.NodePublishVolumeRequest) { r.VolumeId = "" }, "volume ID is empty"},
		{"no target", func(r *csi.NodePublishVolumeRequest) { r.TargetPath = "" }, "target path is empty"},
		{"relative target", func(r *csi.NodePublishVolumeRequest) { r.TargetPath = "pods/x" }, "invalid target path"},
		{"unclean target", func(r *csi.NodePublishVolumeRequest) {
			r.TargetPath = "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/secrets/../x/mount"
		}, "invalid target path"},
		{"target outside kubelet", func(r *csi.NodePublishVolumeRequest) { r.TargetPath = "/etc/secrets/mount" }, "invalid target path"},
		{"target of another pod", func(r *csi.NodePublishVolumeRequest) {
			r.TargetPath = "/var/lib/kubelet/pods/other/volumes/kubernetes.io~csi/secrets/mount"
		}, "invalid target path"},
		{"target not mount", func(r *csi.NodePublishVolumeRequest) {
			r.TargetPath = "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/secrets/data"
		}, "invalid target path"},
		{"target too deep", func(r *csi.NodePublishVolumeRequest) {
			r.TargetPath = "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/a/b/mount"
		}, "invalid target path"},
		{"target of another plugin", func(r *csi.NodePublishVolumeRequest) {
			r.TargetPath = "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~secret/secrets/mount"
		}, "invalid target path"},
		{"pod uid with a slash", func(r *csi.NodePublishVolumeRequest) {
			r.VolumeContext[AttrPodUID] = "uid/volumes"
		}, "invalid target path"},
		{"pod uid dot-dot", func(r *csi.NodePublishVolumeRequest) {
			r.VolumeContext[AttrPodUID] = ".."
			r.TargetPath = "/var/lib/kubelet/pods/../volumes/kubernetes.io~csi/secrets/mount"
		}, "invalid target path"},
		{"read-write", func(r *csi.NodePublishVolumeRequest) { r.Readonly = false }, "readOnly: true"},
		{"no pod uid", func(r *csi.NodePublishVolumeRequest) { delete(r.VolumeContext, AttrPodUID) }, "podInfoOnMount"},
		{"no capability", func(r *csi.NodePublishVolumeRequest) { r.VolumeCapability = nil }, "capability is missing"},
		{"block", func(r *csi.NodePublishVolumeRequest) {
			r.VolumeCapability.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		}, "block access"},
		{"no access type", func(r *csi.NodePublishVolumeRequest) { r.VolumeCapability.AccessType = nil }, "mount access"},
		{"no class", func(r *csi.NodePublishVolumeRequest) { delete(r.VolumeContext, AttrClass) }, "volumeAttributes.secretProviderClass"},
		{"no pod info", func(r *csi.NodePublishVolumeRequest) { delete(r.VolumeContext, AttrPodName) }, "podInfoOnMount"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := validRequest()
			tc.mutate(req)
			p, err := parsePublishRequest(req, testKubeletRoot)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if p.className != "db" || p.podNamespace != "shop" || !p.readOnly {
					t.Fatalf("parsed request = %+v", p)
				}
				return
			}
			if !errors.Is(err, errInvalidRequest) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want invalid request containing %q", err, tc.want)
			}
		})
	}
}

func TestBuildMountRequest(t *testing.T) {
	spc := &secretsstorev1.SecretProviderClass{Spec: secretsstorev1.SecretProviderClassSpec{
		Provider:   "local",
		Parameters: map[string]string{"objects": "- objectName: a", AttrPodName: "overridden"},
	}}
	req := validRequest()
	req.Secrets = map[string]string{"username": "u", AttrTokens: `{"sts.amazonaws.com":{"token":"t"}}`}
	p, err := parsePublishRequest(req, testKubeletRoot)
	if err != nil {
		t.Fatal(err)
	}
	got, err := buildMountRequest(spc, p, []volume.Object{{ID: "a", Version: "v1"}})
	if err != nil {
		t.Fatal(err)
	}
	var attrs, secrets map[string]string
	if err := json.Unmarshal([]byte(got.GetAttributes()), &attrs); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(got.GetSecrets()), &secrets); err != nil {
		t.Fatal(err)
	}
	wantAttrs := map[string]string{
		"objects": "- objectName: a", AttrClass: "db", AttrPodName: "web-0", AttrPodNamespace: "shop", AttrPodUID: "uid",
		AttrTokens: `{"sts.amazonaws.com":{"token":"t"}}`,
	}
	if d := cmp.Diff(wantAttrs, attrs); d != "" {
		t.Errorf("attributes (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"username": "u"}, secrets); d != "" {
		t.Errorf("secrets (-want +got):\n%s", d)
	}
	want := &v1alpha1.MountRequest{
		Attributes: got.GetAttributes(), Secrets: got.GetSecrets(),
		TargetPath: req.GetTargetPath(), Permission: "420",
		CurrentObjectVersion: []*v1alpha1.ObjectVersion{{Id: "a", Version: "v1"}},
	}
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Errorf("mount request (-want +got):\n%s", d)
	}
	if spc.Spec.Parameters[AttrPodName] != "overridden" {
		t.Error("building the request must not modify the class")
	}
}

func TestBuildMountRequestEmptySecrets(t *testing.T) {
	p, err := parsePublishRequest(validRequest(), testKubeletRoot)
	if err != nil {
		t.Fatal(err)
	}
	got, err := buildMountRequest(&secretsstorev1.SecretProviderClass{}, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSecrets() != "{}" {
		t.Fatalf("secrets = %q, want {} (providers unmarshal it unconditionally)", got.GetSecrets())
	}
}
