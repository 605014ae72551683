package vault

import (
	"testing"

	"github.com/keymount/keymount/provider/vault/spec"
)

func TestVolumeID(t *testing.T) {
	pod := &spec.Spec{PodUID: "uid-1", Namespace: "ns", Class: "c"}
	dir := "/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~csi/secrets/"
	stage, mount := volumeID(dir+"keymount-stage-0a1b", pod), volumeID(dir+"mount", pod)
	if stage != mount || stage != "pod uid-1/secrets" {
		t.Errorf("staging directory %q and mount %q, want both pod uid-1/secrets", stage, mount)
	}
	if got := volumeID("/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~csi/other/mount", pod); got == mount {
		t.Errorf("another volume of the pod is %q too", got)
	}
	// A path naming another pod than the proven one is taken as a path.
	if got := volumeID("/var/lib/kubelet/pods/uid-2/volumes/kubernetes.io~csi/secrets/mount", pod); got == mount || got == "pod uid-2/secrets" {
		t.Errorf("a path of another pod is %q", got)
	}
	sync := func(ns, class string) string {
		return volumeID("/mnt/secrets-store", &spec.Spec{Namespace: ns, Class: class})
	}
	if sync("a", "x") == sync("a", "y") || sync("a", "x") == sync("b", "x") {
		t.Error("SecretSyncs of different classes or namespaces share a volume")
	}
}
