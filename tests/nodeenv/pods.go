package nodeenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keymount/keymount/tests/poll"
)

// PodTimeout bounds how long a test waits for a pod to reach a state: far
// longer than the seconds it takes, so that only a stuck pod fails.
const PodTimeout = 3 * time.Minute

// ProbePod is a pod on the node running the probe image with args, with
// the host's network (the node has no pod network), a termination grace of
// one second, and the namespace's "default" service account named (the
// control plane runs without the ServiceAccount admission plugin, which
// would fill it in; kubelet needs it for the CSIDriver's tokens).
func (n *Node) ProbePod(ns, name string, args ...string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:                      n.Name,
			ServiceAccountName:            "default",
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:            "probe",
				Image:           Image,
				ImagePullPolicy: corev1.PullNever,
				Args:            args,
			}},
		},
	}
}

// WaitPod waits until the pod satisfies cond, which sees every version of
// it, and returns that version.
func (n *Node) WaitPod(t testing.TB, ns, name string, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := poll.Wait(t.Context(), PodTimeout, func(ctx context.Context) (bool, error) {
		p, err := n.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s is not %s: %v\nlast status: %+v\n%s\n%s", ns, name, what, err, podStatus(last), n.LogTail("kubelet"), n.LogTail("keymount-driver"))
	}
	return last
}

// Running is a WaitPod condition: the pod's phase is Running and every
// container is running.
func Running(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) > 0
}

func podStatus(p *corev1.Pod) string {
	if p == nil {
		return "(none)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s", p.Status.Phase)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s(%s)", c.Type, c.Status, c.Reason)
	}
	for _, c := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, " container %s: %+v", c.Name, c.State)
	}
	return b.String()
}

// ContainerLog is what the pod's container printed so far (all its
// restarts), one entry per line, without the runtime's timestamp and
// stream prefix. It reads kubelet's log files on the node.
func (n *Node) ContainerLog(t testing.TB, pod *corev1.Pod, container string) []string {
	t.Helper()
	dir := filepath.Join(n.podLogs, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), container)
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatalf("nodeenv: %v", err)
	}
	var lines []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("nodeenv: %v", err)
		}
		// CRI log format: "<RFC3339Nano> <stream> <P|F> <text>"; P marks a
		// partial line continued by the next entry.
		sc := bufio.NewScanner(bytes.NewReader(data))
		partial := ""
		for sc.Scan() {
			f := strings.SplitN(sc.Text(), " ", 4)
			if len(f) < 4 {
				continue
			}
			if f[2] == "P" {
				partial += f[3]
				continue
			}
			lines = append(lines, partial+f[3])
			partial = ""
		}
	}
	return lines
}

// WaitLog waits until the container printed a line for which match is
// true, and returns it.
func (n *Node) WaitLog(t testing.TB, pod *corev1.Pod, container, what string, match func(string) bool) string {
	t.Helper()
	var found string
	err := poll.Wait(t.Context(), PodTimeout, func(context.Context) (bool, error) {
		for _, l := range n.ContainerLog(t, pod, container) {
			if match(l) {
				found = l
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("container %s of pod %s/%s never printed %s: %v\nit printed: %q", container, pod.Namespace, pod.Name, what, err, n.ContainerLog(t, pod, container))
	}
	return found
}

// TargetPath is where kubelet has the driver mount the pod's CSI volume.
func (n *Node) TargetPath(pod *corev1.Pod, volume string) string {
	return filepath.Join(n.KubeletRoot, "pods", string(pod.UID), "volumes", "kubernetes.io~csi", volume, "mount")
}
