package nodeenv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keymount/keymount/tests/poll"
)

// podsGoneTimeout bounds how long teardown waits for kubelet to stop and
// remove every pod.
const podsGoneTimeout = 2 * time.Minute

// teardown takes the node down in order: every pod deleted (kubelet stops
// their containers and unpublishes their volumes; with Options.Helm the
// workloads' pods first, while the driver's pod still serves, then the
// DaemonSets and their pods), keymount stopped,
// kubelet stopped, what containerd still runs killed and removed, containerd
// stopped, then any shim, mount or cgroup left behind is cleaned up and
// reported.
func (n *Node) teardown(tb testing.TB) {
	// The test's context is canceled by now: teardown has its own.
	ctx, cancel := context.WithTimeout(context.Background(), 2*podsGoneTimeout)
	defer cancel()
	// No ReplicaSet may replace the workload pods deleted next.
	if err := n.deleteReplicaSets(ctx); err != nil {
		tb.Errorf("nodeenv: %v", err)
	}
	if err := n.deletePods(ctx, notDaemonSetPod); err != nil {
		tb.Errorf("nodeenv: %v\n%s", err, n.LogTail("kubelet"))
	}
	if err := n.deleteDaemonSets(ctx); err != nil {
		tb.Errorf("nodeenv: %v", err)
	}
	if err := n.deletePods(ctx, func(*corev1.Pod) bool { return true }); err != nil {
		tb.Errorf("nodeenv: %v\n%s", err, n.LogTail("kubelet"))
	}
	if n.helm != nil {
		n.helm.stopLogs()
		n.helm.logs.collect()
	}
	n.mu.Lock()
	driver, provider, kubelet, containerd := n.driver, n.provider, n.kubelet, n.containerd
	n.driver, n.provider, n.kubelet, n.containerd = nil, nil, nil, nil
	n.mu.Unlock()
	driver.stop(tb)
	provider.stop(tb)
	kubelet.stop(tb)
	if containerd != nil && containerd.p.Alive() {
		if err := n.removeContainers(ctx); err != nil {
			tb.Errorf("nodeenv: %v", err)
		}
	}
	containerd.stop(tb)
	// Shims outlive containerd by design; each serves containers that are
	// gone by now and exits on its own once they are deleted. Any left is
	// killed, and that is a failure of the teardown above.
	for _, pid := range n.processes() {
		tb.Errorf("nodeenv: process %d (%s) still running after the node stopped: killed", pid, cmdline(pid))
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := n.unmountAll(); err != nil {
		tb.Errorf("nodeenv: %v", err)
	}
	if err := removeCgroups(n.CgroupRoot); err != nil {
		tb.Errorf("nodeenv: %v", err)
	}
}

// notDaemonSetPod: a pod no DaemonSet controls (a workload's).
func notDaemonSetPod(p *corev1.Pod) bool {
	c := metav1.GetControllerOf(p)
	return c == nil || c.Kind != "DaemonSet"
}

// deleteDaemonSets deletes every DaemonSet, so that none replaces the pods
// teardown deletes next.
func (n *Node) deleteDaemonSets(ctx context.Context) error {
	list, err := n.Kube.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing DaemonSets: %w", err)
	}
	for _, ds := range list.Items {
		if err := n.Kube.AppsV1().DaemonSets(ds.Namespace).Delete(ctx, ds.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
		}
	}
	return nil
}

// deleteReplicaSets deletes every Deployment, then every ReplicaSet, so
// that none replaces the pods teardown deletes next.
func (n *Node) deleteReplicaSets(ctx context.Context) error {
	apps := n.Kube.AppsV1()
	deployments, err := apps.Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Deployments: %w", err)
	}
	for _, d := range deployments.Items {
		if err := apps.Deployments(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
	}
	sets, err := apps.ReplicaSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing ReplicaSets: %w", err)
	}
	for _, rs := range sets.Items {
		if err := apps.ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting ReplicaSet %s/%s: %w", rs.Namespace, rs.Name, err)
		}
	}
	return nil
}

// deletePods deletes the node's pods for which which is true and waits
// until kubelet has confirmed each one's end (the API server removes a pod
// only then).
func (n *Node) deletePods(ctx context.Context, which func(*corev1.Pod) bool) error {
	pods := n.Kube.CoreV1().Pods(metav1.NamespaceAll)
	selected := func(ctx context.Context) ([]corev1.Pod, error) {
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
		if err != nil {
			return nil, fmt.Errorf("listing the node's pods: %w", err)
		}
		var out []corev1.Pod
		for i := range list.Items {
			if which(&list.Items[i]) {
				out = append(out, list.Items[i])
			}
		}
		return out, nil
	}
	list, err := selected(ctx)
	if err != nil {
		return err
	}
	for _, p := range list {
		if err := n.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	var left []corev1.Pod
	err = poll.Wait(ctx, podsGoneTimeout, func(ctx context.Context) (bool, error) {
		var err error
		left, err = selected(ctx)
		return err == nil && len(left) == 0, err
	})
	if err != nil {
		names := make([]string, 0, len(left))
		for _, p := range left {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		return fmt.Errorf("pods %v were not removed by kubelet: %w", names, err)
	}
	return nil
}

// removeContainers kills and removes whatever containerd still runs in the
// CRI namespace (sandboxes kubelet had no time to remove), so their shims
// exit.
func (n *Node) removeContainers(ctx context.Context) error {
	out, err := n.ctr(ctx, "containers", "list", "--quiet")
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range strings.Fields(string(out)) {
		// A container without a task fails the kill; the delete is what
		// counts.
		_, _ = n.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
		if err := poll.Wait(ctx, stopGrace, func(ctx context.Context) (bool, error) {
			_, err := n.ctr(ctx, "tasks", "delete", id)
			if err == nil || strings.Contains(err.Error(), "not found") {
				return true, nil
			}
			return false, nil
		}); err != nil {
			errs = append(errs, fmt.Errorf("task of container %s did not end: %w", id, err))
			continue
		}
		if _, err := n.ctr(ctx, "containers", "delete", id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// processes lists the processes whose command line names the node's root,
// but for the control plane (stopped after the node): containerd's shims
// above all.
func (n *Node) processes() []int {
	cp := filepath.Join(n.Root, "control-plane") + "/"
	var out []int
	for _, pid := range processesNaming(n.Root) {
		if !strings.Contains(cmdline(pid), cp) {
			out = append(out, pid)
		}
	}
	return out
}

func processesNaming(root string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if strings.Contains(cmdline(pid), root) && !zombie(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func cmdline(pid int) string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.ReplaceAll(string(data), "\x00", " "))
}

func zombie(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true // gone
	}
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// unmountAll detaches every mount under the node's root, deepest first.
func (n *Node) unmountAll() error {
	for range 16 {
		ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(n.Root))
		if err != nil {
			return fmt.Errorf("read the mount table: %w", err)
		}
		if len(ms) == 0 {
			return nil
		}
		sort.SliceStable(ms, func(i, j int) bool {
			return strings.Count(ms[i].Mountpoint, "/") > strings.Count(ms[j].Mountpoint, "/")
		})
		for _, m := range ms {
			if err := unix.Unmount(m.Mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("unmount %s: %w", m.Mountpoint, err)
			}
		}
	}
	return fmt.Errorf("mounts are still left under %s", n.Root)
}

// cgroupHierarchies are the mount points of every cgroup hierarchy (v1
// controllers, named ones and the unified v2 one).
func cgroupHierarchies() ([]string, error) {
	ms, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return m.FSType != "cgroup" && m.FSType != "cgroup2", false
	})
	if err != nil {
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Mountpoint)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// makeCgroupRoot creates kubelet's cgroupRoot in every hierarchy (kubelet
// requires it to exist), with the cpuset of its parent.
func (n *Node) makeCgroupRoot(tb testing.TB) {
	hs, err := cgroupHierarchies()
	if err != nil {
		tb.Fatalf("nodeenv: %v", err)
	}
	for _, h := range hs {
		dir := filepath.Join(h, n.CgroupRoot)
		if err := os.Mkdir(dir, 0o755); err != nil { //nolint:gosec // G301: a cgroup, as kubelet makes them
			tb.Fatalf("nodeenv: creating cgroup %s: %v", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil { //nolint:gosec // G306: a cgroup file
				tb.Fatalf("nodeenv: %s: %v", filepath.Join(dir, f), err)
			}
		}
	}
}

// removeCgroups removes cgroup root and every cgroup below it, deepest
// first, in every hierarchy. A cgroup that still has processes cannot be
// removed: that is an error.
func removeCgroups(root string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		top := filepath.Join(h, root)
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.SliceStable(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Leftovers lists what a stopped node left behind: processes whose command
// line names root, mounts under root, and cgroups named cgroupRoot in any
// hierarchy. Empty means the node is gone.
func Leftovers(root, cgroupRoot string) []string {
	var out []string
	for _, pid := range processesNaming(root) {
		out = append(out, fmt.Sprintf("process %d (%s)", pid, cmdline(pid)))
	}
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(root))
	if err != nil {
		out = append(out, "unreadable mount table: "+err.Error())
	}
	for _, m := range ms {
		out = append(out, "mount "+m.Mountpoint)
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		out = append(out, err.Error())
	}
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, cgroupRoot)); err == nil {
			out = append(out, "cgroup "+filepath.Join(h, cgroupRoot))
		}
	}
	return out
}
