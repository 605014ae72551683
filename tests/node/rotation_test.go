package node_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/nodeenv"
	"github.com/keymount/keymount/tests/poll"
)

// TestOnDemandClassAndTrigger: with a real kubelet republishing the volume,
// a class whose policy is OnDemand keeps its old value in the running
// container (kubelet's republish is seen and declined), and a new
// keymount.io/refresh value on the class brings the change into the
// container without waiting for kubelet: the driver republishes from the
// request kubelet last sent, with its real service account tokens.
func TestOnDemandClassAndTrigger(t *testing.T) {
	t.Parallel()
	n := node(t)
	ns := namespace(t, n)
	v1, v2 := "v1-"+randomHex(8), "v2-"+randomHex(8)
	putObject(t, n, ns+"/dsn", v1)
	localClass(t, n, ns, "ondemand", `
- objectName: `+ns+`/dsn
  objectAlias: dsn
`)
	annotateClass(t, n, ns, "ondemand", rotation.PolicyAnnotation, string(rotation.OnDemand))
	pod := createPod(t, n, ns, "app", "ondemand", "show", "-follow", mountPath+"/dsn")
	n.WaitPod(t, ns, "app", "Running", nodeenv.Running)
	n.WaitLog(t, pod, "probe", "the first value", hasContent("dsn", v1))

	putObject(t, n, ns+"/dsn", v2)
	volumeID := volumeIDOf(t, n, ns+"/app")
	mark := logSize(t, n)
	waitDriverLog(t, n, mark, `"refresh decision"`, `volumeID="`+volumeID+`"`, `decision="skipped_by_policy"`)
	for _, l := range n.ContainerLog(t, pod, "probe") {
		if hasContent("dsn", v2)(l) {
			t.Fatalf("an OnDemand volume was refreshed by kubelet's republish: %q", l)
		}
	}

	start := time.Now()
	annotateClass(t, n, ns, "ondemand", rotation.RefreshAnnotation, "now-1")
	n.WaitLog(t, pod, "probe", "the value the trigger brought", hasContent("dsn", v2))
	t.Logf("class trigger to the container's new value: %s", time.Since(start).Round(time.Millisecond))
}

func annotateClass(t *testing.T, n *nodeenv.Node, ns, name, key, value string) {
	t.Helper()
	spc := &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := `{"metadata":{"annotations":{"` + key + `":"` + value + `"}}}`
	if err := n.Ctrl.Patch(t.Context(), spc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("annotate class %s/%s: %v", ns, name, err)
	}
}

// volumeIDOf finds the CSI volume ID kubelet gave the volume of pod
// (namespace/name), from the driver's log of its first publish.
func volumeIDOf(t *testing.T, n *nodeenv.Node, pod string) string {
	t.Helper()
	data, err := os.ReadFile(n.LogPath("keymount-driver"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.Contains(line, `"volume published"`) && strings.Contains(line, `pod="`+pod+`"`) {
			if _, rest, ok := strings.Cut(line, `volumeID="`); ok {
				id, _, _ := strings.Cut(rest, `"`)
				return id
			}
		}
	}
	t.Fatalf("the driver's log has no publish of pod %s", pod)
	return ""
}

func logSize(t *testing.T, n *nodeenv.Node) int64 {
	t.Helper()
	fi, err := os.Stat(n.LogPath("keymount-driver"))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// waitDriverLog waits (up to nodeenv.PodTimeout: kubelet republishes about
// every 60-90 s) until one line of the driver's log after mark holds every
// string of want.
func waitDriverLog(t *testing.T, n *nodeenv.Node, mark int64, want ...string) {
	t.Helper()
	err := poll.Wait(t.Context(), nodeenv.PodTimeout, func(context.Context) (bool, error) {
		data, err := os.ReadFile(n.LogPath("keymount-driver"))
		if err != nil || int64(len(data)) < mark {
			return false, err
		}
	lines:
		for line := range strings.SplitSeq(string(data[mark:]), "\n") {
			for _, w := range want {
				if !strings.Contains(line, w) {
					continue lines
				}
			}
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the driver never logged %q: %v\n%s", want, err, n.LogTail("keymount-driver"))
	}
}
