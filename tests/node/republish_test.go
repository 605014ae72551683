package node_test

import (
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/keymount/keymount/tests/nodeenv"
)

// TestKubeletRepublishCarriesChange: kubelet republishes the volume of a
// running pod on its own (requiresRepublish), and a changed object reaches
// the running container. The first change may ride on a pod sync that the
// container's start caused; the second is made once the pod is steady, so
// only kubelet's periodic sync (every syncFrequency, 1m, plus jitter) can
// carry it.
func TestKubeletRepublishCarriesChange(t *testing.T) {
	t.Parallel()
	n := node(t)
	ns := namespace(t, n)
	v1, v2, v3 := "v1-"+randomHex(8), "v2-"+randomHex(8), "v3-"+randomHex(8)
	putObject(t, n, ns+"/api-key", v1)
	localClass(t, n, ns, "keys", `
- objectName: `+ns+`/api-key
  objectAlias: api-key
`)
	pod := createPod(t, n, ns, "app", "keys", "show", "-follow", mountPath+"/api-key")
	n.WaitPod(t, ns, "app", "Running", nodeenv.Running)
	n.WaitLog(t, pod, "probe", "the first value", hasContent("api-key", v1))

	putObject(t, n, ns+"/api-key", v2)
	n.WaitLog(t, pod, "probe", "the changed value", hasContent("api-key", v2))
	changed := time.Now()
	putObject(t, n, ns+"/api-key", v3)
	n.WaitLog(t, pod, "probe", "the value changed again", hasContent("api-key", v3))
	t.Logf("the second change reached the container after %s", time.Since(changed).Round(time.Second))
}

// TestRestartsKeepPodsWorking: the driver restarted, then kubelet
// restarted, while a pod runs: its container keeps its volume (the same
// mount on the node, no container restart), kubelet registers the driver
// again, and a later change still reaches the container through kubelet's
// republish, which proves nothing was remounted under it.
func TestRestartsKeepPodsWorking(t *testing.T) {
	t.Parallel()
	n := node(t)
	ns := namespace(t, n)
	v1, v2 := "v1-"+randomHex(8), "v2-"+randomHex(8)
	putObject(t, n, ns+"/cert", v1)
	localClass(t, n, ns, "certs", `
- objectName: `+ns+`/cert
  objectAlias: cert
`)
	pod := createPod(t, n, ns, "app", "certs", "show", "-follow", mountPath+"/cert")
	n.WaitPod(t, ns, "app", "Running", nodeenv.Running)
	n.WaitLog(t, pod, "probe", "the first value", hasContent("cert", v1))
	target := n.TargetPath(pod, "secrets")
	before := mountID(t, target)

	// Each restart makes kubelet register the driver again: after the
	// driver's, through the registration socket the new process serves;
	// after kubelet's, by finding that socket when it starts.
	registrations := n.DriverRegistrations(t)
	n.RestartDriver(t)
	n.WaitDriverRegistrations(t, registrations+1)
	registrations = n.DriverRegistrations(t)
	n.RestartKubelet(t)
	n.WaitDriverRegistrations(t, registrations+1)

	putObject(t, n, ns+"/cert", v2)
	n.WaitLog(t, pod, "probe", "the value changed after the restarts", hasContent("cert", v2))
	if after := mountID(t, target); after != before {
		t.Errorf("the volume's mount on the node changed from %d to %d across the restarts", before, after)
	}
	p := n.WaitPod(t, ns, "app", "Running", nodeenv.Running)
	if rc := p.Status.ContainerStatuses[0].RestartCount; rc != 0 {
		t.Errorf("the container restarted %d times", rc)
	}
}

// mountID is the ID of the topmost mount at path.
func mountID(t *testing.T, path string) int {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatalf("nothing is mounted at %s", path)
	}
	return ms[len(ms)-1].ID
}
