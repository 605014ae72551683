package driver

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/classparams"
)

// FuzzPublishRequest feeds parsePublishRequest and buildMountRequest with
// arbitrary requests: volume IDs, target paths, volume contexts (JSON
// objects of strings) and secrets (including service account tokens).
// Whatever comes in, nothing panics; an accepted request has a read-only,
// kubelet-shaped target of its own pod, a volume-context key that is no
// parameter of the class is refused, and the provider request carries every
// volume-context key and valid JSON secrets without the tokens.
func FuzzPublishRequest(f *testing.F) {
	good := validRequest()
	ctxJSON, _ := json.Marshal(good.VolumeContext)
	f.Add(good.VolumeId, good.TargetPath, true, string(ctxJSON), `{"username":"u"}`)
	f.Add("csi-1", "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/../../../../etc/mount", true, string(ctxJSON), `{}`)
	f.Add("../x", "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/s/mount", false, `{"secretProviderClass":"a"}`, `null`)
	f.Add("csi-2", good.TargetPath, true,
		`{"secretProviderClass":"db","csi.storage.k8s.io/pod.name":"web-0","csi.storage.k8s.io/pod.namespace":"shop","csi.storage.k8s.io/pod.uid":"uid","objects":"- objectName: x","region":"eu-west-1"}`,
		`{}`)
	f.Add("a\x00b", "/etc/passwd", true,
		`{"secretProviderClass":"a","csi.storage.k8s.io/pod.name":"p","csi.storage.k8s.io/pod.namespace":"n","csi.storage.k8s.io/pod.uid":"../.."}`,
		`{"csi.storage.k8s.io/serviceAccount.tokens":"{\"aud\":{\"token\":\"t\",\"expirationTimestamp\":\"2026-01-01T00:00:00Z\"}}"}`)
	f.Fuzz(func(t *testing.T, id, target string, readOnly bool, volumeContext, secrets string) {
		vc := map[string]string{}
		_ = json.Unmarshal([]byte(volumeContext), &vc)
		sec := map[string]string{}
		_ = json.Unmarshal([]byte(secrets), &sec)
		req := &csi.NodePublishVolumeRequest{
			VolumeId: id, TargetPath: target, Readonly: readOnly,
			VolumeCapability: mountCap(), VolumeContext: vc, Secrets: sec,
		}
		p, err := parsePublishRequest(req, testKubeletRoot)
		if err != nil {
			return
		}
		if !p.readOnly {
			t.Fatal("accepted a read-write volume")
		}
		want := filepath.Join(testKubeletRoot, "pods", p.podUID, "volumes", "kubernetes.io~csi") + "/"
		if !strings.HasPrefix(p.targetPath, want) || filepath.Clean(p.targetPath) != p.targetPath ||
			filepath.Base(p.targetPath) != "mount" || strings.Count(strings.TrimPrefix(p.targetPath, want), "/") != 1 {
			t.Fatalf("accepted target %q for pod %q", p.targetPath, p.podUID)
		}
		// A key neither the driver's nor kubelet's must be a parameter of
		// the class, which the pod's value then overrides.
		class := &secretsstorev1.SecretProviderClass{Spec: secretsstorev1.SecretProviderClassSpec{Parameters: map[string]string{}}}
		for k := range vc {
			if !classparams.DriverAdded(k) {
				class.Spec.Parameters[k] = "the class's value"
			}
		}
		if _, err := buildMountRequest(&secretsstorev1.SecretProviderClass{}, p, nil); (err != nil) != (len(class.Spec.Parameters) > 0) {
			t.Fatalf("a class without parameters, volume context keys %d of the pod's: %v", len(class.Spec.Parameters), err)
		}
		mreq, err := buildMountRequest(class, p, nil)
		if err != nil {
			t.Fatalf("valid request, no mount request: %v", err)
		}
		attrs := map[string]string{}
		if err := json.Unmarshal([]byte(mreq.GetAttributes()), &attrs); err != nil {
			t.Fatalf("attributes are not a JSON object: %v", err)
		}
		for k, v := range vc {
			if _, fromSecrets := sec[AttrTokens]; k == AttrTokens && fromSecrets {
				continue // tokens in the secrets win, as newer kubelets send them
			}
			if attrs[k] != v {
				t.Fatalf("volume-context key %q not passed on", k)
			}
		}
		gotSecrets := map[string]string{}
		if err := json.Unmarshal([]byte(mreq.GetSecrets()), &gotSecrets); err != nil {
			t.Fatalf("secrets are not a JSON object: %v", err)
		}
		if _, ok := gotSecrets[AttrTokens]; ok {
			t.Fatal("service account tokens left in the secrets")
		}
		if tok, ok := sec[AttrTokens]; ok && attrs[AttrTokens] != tok {
			t.Fatal("service account tokens from the secrets did not reach the attributes")
		}
		checkSyncingClass(t, p)
	})
}

// checkSyncingClass: whatever the pod's volume context, a class that syncs
// Secrets either gets a request whose every non-kubelet attribute is one
// of its parameters with its value, or an InvalidArgument.
func checkSyncingClass(t *testing.T, p *publishRequest) {
	c := syncingClass(true)
	mreq, err := buildMountRequest(c, p, nil)
	if err != nil {
		if !errors.Is(err, errInvalidRequest) {
			t.Fatalf("syncing class: %v, want an invalid request", err)
		}
		return
	}
	attrs := map[string]string{}
	if err := json.Unmarshal([]byte(mreq.GetAttributes()), &attrs); err != nil {
		t.Fatalf("attributes are not a JSON object: %v", err)
	}
	for k, v := range attrs {
		if k == AttrClass || strings.HasPrefix(k, kubeletAttrPrefix) {
			continue
		}
		if want, ok := c.Spec.Parameters[k]; !ok || v != want {
			t.Fatalf("a syncing class's request carries %q = %q from the pod, want the class's %q", k, v, want)
		}
	}
}
