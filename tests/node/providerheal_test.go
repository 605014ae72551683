package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keymount/keymount/tests/nodeenv"
	"github.com/keymount/keymount/tests/poll"
)

// checkHungProviderHeals, on TestHelmChartOnTheNode's node (whose driver
// asks its providers every 5s) with a pod of ns reading value through the
// chart's local provider: that provider, frozen with SIGSTOP (its process
// alive, its socket accepting connections, no answer), fails its liveness
// probe (the provider binary's --probe) and kubelet restarts its container;
// the driver, not ready while a provider of a mounted volume does not
// answer, is ready again once the new provider serves, without being
// restarted itself (same container, same process), and mounts a new pod's
// volume through it.
func checkHungProviderHeals(t *testing.T, n *nodeenv.Node, ns, value string) {
	driverPod := n.DriverPod(t)
	readyz := "http://" + driverHealthAddr(t, driverPod) + "/readyz"
	waitReadyz(t, readyz, http.StatusOK, "ok")
	driverBefore := containerStatus(t, driverPod, driverContainer)
	driverPID := processOf(t, "/usr/local/bin/keymount-driver", "--health-addr="+driverHealthAddr(t, driverPod))

	provider := providerPod(t, n)
	if l := container(t, provider, "provider").LivenessProbe; l == nil || l.Exec == nil || !slices.Contains(l.Exec.Command, "--probe") {
		t.Fatalf("the chart's local provider has no --probe liveness probe: %+v", l)
	}
	before := containerStatus(t, provider, "provider")
	pid := processOf(t, "/usr/local/bin/keymount-provider-local", "--provider-dir="+n.ProviderDir)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP the provider (pid %d): %v", pid, err)
	}
	// Should the test end before kubelet kills it.
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	t.Logf("provider pid %d stopped (container %s, %d restarts)", pid, before.ContainerID, before.RestartCount)

	waitReadyz(t, readyz, http.StatusServiceUnavailable, `provider "local"`)
	waitRestarted(t, n, provider, before)
	if stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil && stoppedState(string(stat)) {
		t.Errorf("the stopped provider process %d is still there: %s", pid, stat)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Error(err)
	}
	if next := processOf(t, "/usr/local/bin/keymount-provider-local", "--provider-dir="+n.ProviderDir); next == pid {
		t.Errorf("the provider process is still %d", pid)
	}
	checkLivenessEvent(t, n, provider)

	waitReadyz(t, readyz, http.StatusOK, "ok")
	// Kubelet's readiness probe of the driver sees it too, in its own time.
	var driverAfter corev1.ContainerStatus
	err := poll.Check(t.Context(), nodeenv.PodTimeout, func(context.Context) error {
		driverAfter = containerStatus(t, n.DriverPod(t), driverContainer)
		if !driverAfter.Ready {
			return fmt.Errorf("driver container %s not ready", driverAfter.ContainerID)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for kubelet to see the driver ready: %v", err)
	}
	if driverAfter.ContainerID != driverBefore.ContainerID || driverAfter.RestartCount != 0 {
		t.Errorf("driver container %s (%d restarts), want %s still, never restarted",
			driverAfter.ContainerID, driverAfter.RestartCount, driverBefore.ContainerID)
	}
	if got := processOf(t, "/usr/local/bin/keymount-driver", "--health-addr="+driverHealthAddr(t, driverPod)); got != driverPID {
		t.Errorf("driver process %d, want %d, the one before the provider hung", got, driverPID)
	}
	// The driver mounts through the restarted provider.
	healed := createPod(t, n, ns, "healed", "db", "show", mountPath+"/dsn")
	n.WaitPod(t, ns, "healed", "Running", nodeenv.Running)
	n.WaitLog(t, healed, "probe", "the value mounted through the restarted provider", hasContent("dsn", value))
	if err := n.Kube.CoreV1().Pods(ns).Delete(t.Context(), "healed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "pod healed", func(ctx context.Context) error {
		_, err := n.Kube.CoreV1().Pods(ns).Get(ctx, "healed", metav1.GetOptions{})
		return err
	})
}

// driverContainer is the chart's driver container.
const driverContainer = "secrets-store"

// driverHealthAddr is the driver's --health-addr (the node's network).
func driverHealthAddr(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	for _, a := range container(t, pod, driverContainer).Args {
		if addr, ok := strings.CutPrefix(a, "--health-addr="); ok {
			return addr
		}
	}
	t.Fatalf("the driver container has no --health-addr")
	return ""
}

// waitReadyz waits until GET url answers code with a body containing want.
func waitReadyz(t *testing.T, url string, code int, want string) {
	t.Helper()
	err := poll.Check(t.Context(), nodeenv.PodTimeout, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != code || !strings.Contains(string(body), want) {
			return fmt.Errorf("%s: %s %q", url, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for %d containing %q: %v", code, want, err)
	}
}

// providerPod is the running pod of the chart's local provider DaemonSet.
func providerPod(t *testing.T, n *nodeenv.Node) *corev1.Pod {
	t.Helper()
	pods, err := n.Kube.CoreV1().Pods(nodeenv.ReleaseNamespace).List(t.Context(),
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + nodeenv.Release + "-provider-local"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d local provider pods, want 1", len(pods.Items))
	}
	return &pods.Items[0]
}

func container(t *testing.T, pod *corev1.Pod, name string) *corev1.Container {
	t.Helper()
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	t.Fatalf("pod %s has no container %s", pod.Name, name)
	return nil
}

func statusOf(pod *corev1.Pod, name string) corev1.ContainerStatus {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == name {
			return s
		}
	}
	return corev1.ContainerStatus{}
}

func containerStatus(t *testing.T, pod *corev1.Pod, name string) corev1.ContainerStatus {
	t.Helper()
	s := statusOf(pod, name)
	if s.ContainerID == "" {
		t.Fatalf("pod %s: no status of container %s", pod.Name, name)
	}
	return s
}

// processOf is the one process on the host running binary with arg (a
// probe, which runs the binary with --probe, excluded).
func processOf(t *testing.T, binary, arg string) int {
	t.Helper()
	var found []int
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if args[0] == binary && slices.Contains(args, arg) && !slices.Contains(args, "--probe") {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		t.Fatalf("processes of %s %s: %v, want one", binary, arg, found)
	}
	return found[0]
}

// waitRestarted waits until kubelet has restarted the provider container
// of pod (a new container, one restart more than before) and it is ready.
func waitRestarted(t *testing.T, n *nodeenv.Node, pod *corev1.Pod, before corev1.ContainerStatus) {
	t.Helper()
	err := poll.Check(t.Context(), nodeenv.PodTimeout, func(ctx context.Context) error {
		p, err := n.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		after := statusOf(p, "provider")
		if after.RestartCount <= before.RestartCount || !after.Ready || after.ContainerID == before.ContainerID {
			return fmt.Errorf("provider container %s: %d restarts, ready %v", after.ContainerID, after.RestartCount, after.Ready)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for kubelet to restart the hung provider: %v", err)
	}
}

// checkLivenessEvent: kubelet reported the liveness probe of pod's local
// provider failing with the probe's own line (why it restarted it).
func checkLivenessEvent(t *testing.T, n *nodeenv.Node, pod *corev1.Pod) {
	t.Helper()
	want := "keymount-provider-local: probe: the provider on " + filepath.Join(n.ProviderDir, "local.sock") +
		" did not answer its health check within 4s"
	err := poll.Check(t.Context(), nodeenv.PodTimeout, func(ctx context.Context) error {
		events, err := n.Kube.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range events.Items {
			if e.Reason == "Unhealthy" && strings.Contains(e.Message, "Liveness probe failed") && strings.Contains(e.Message, want) {
				return nil
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return fmt.Errorf("no Unhealthy event of the liveness probe's line; events: %q", seen)
	})
	if err != nil {
		t.Errorf("the provider's liveness probe failure: %v", err)
	}
}

// stoppedState reports whether a /proc/<pid>/stat line is of a stopped
// process (state T, after the command's parenthesized name).
func stoppedState(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	return i >= 0 && strings.HasPrefix(stat[i+1:], " T")
}
