package node_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/keymount/keymount/tests/nodeenv"
)

// TestFSGroupReadsGroupOnlyFile: a pod running as a non-root user with an
// fsGroup reads a 0440 file: kubelet passes the fsGroup (VOLUME_MOUNT_GROUP
// with fsGroupPolicy: File) and the driver makes it the files' group.
func TestFSGroupReadsGroupOnlyFile(t *testing.T) {
	t.Parallel()
	n := node(t)
	ns := namespace(t, n)
	value := "grp-" + randomHex(8)
	putObject(t, n, ns+"/key", value)
	localClass(t, n, ns, "grouped", `
- objectName: `+ns+`/key
  objectAlias: key
  filePermission: "0440"
`)
	user, group, fsGroup := int64(1000), int64(1000), int64(2000)
	pod := n.ProbePod(ns, "nonroot", "show", "-follow", mountPath+"/key")
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &user, RunAsGroup: &group, FSGroup: &fsGroup}
	withVolume(&pod.Spec, "grouped")
	pod = submit(t, n, pod)
	n.WaitPod(t, ns, "nonroot", "Running", nodeenv.Running)
	n.WaitLog(t, pod, "probe", "the group-readable file", func(l string) bool {
		return l == `file `+mountPath+`/key mode=0440 gid=2000 content="`+value+`"`
	})
	n.WaitLog(t, pod, "probe", "its identity", func(l string) bool {
		return l == "id uid=1000 gid=1000 groups=[2000]" || l == "id uid=1000 gid=1000 groups=[1000 2000]"
	})
}
