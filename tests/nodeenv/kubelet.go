package nodeenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keymount/keymount/tests/poll"
)

// kubeletConfigTemplate is kubelet's configuration file. What machines of
// this kind need: cgroupfs with a cgroup root of the node's own,
// failCgroupV1: false (the VMs run cgroup v1, which kubelet >= 1.35 refuses
// by default), failSwapOn: false. Its API and health endpoints are on
// 127.0.0.1; it changes no iptables; eviction and image garbage collection
// are off so a busy test disk never removes the imported image or a pod.
const kubeletConfigTemplate = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %[1]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[2]d
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupRoot: %[3]s
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%[4]s
podLogsDir: %[5]s
syncFrequency: %[6]s
fileCheckFrequency: 1h
makeIPTablesUtilChains: false
resolvConf: ""
registerNode: true
evictionHard:
  memory.available: "0%%"
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
localStorageCapacityIsolation: false
`

type kubeletConfig struct {
	args []string
}

// startKubelet writes kubelet's configuration and credentials (user
// system:node:<name>, in system:nodes and, since this control plane runs no
// Node authorizer, system:masters), starts it and waits until the Node is
// Ready.
func (n *Node) startKubelet(tb testing.TB, opts Options) {
	tb.Helper()
	dir := mkdir(tb, n.Root, "kubelet-config")
	n.makeCgroupRoot(tb)
	sync := opts.KubeletSyncFrequency
	if sync == 0 {
		sync = time.Minute
	}
	cfg := fmt.Sprintf(kubeletConfigTemplate, freePort(tb), freePort(tb), n.CgroupRoot, n.containerdSocket(), n.podLogs, sync)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		tb.Fatalf("nodeenv: %v", err)
	}
	kubeconfig, _ := n.Env.KubeconfigFor(tb, "system:node:"+n.Name, []string{"system:nodes", "system:masters"})
	n.kubeletConfig.args = []string{
		"--config=" + cfgPath,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + n.KubeletRoot,
		"--cert-dir=" + mkdir(tb, dir, "pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=127.0.0.1",
		"--volume-plugin-dir=" + mkdir(tb, dir, "volume-plugins"),
		"--v=2",
	}
	n.runKubelet(tb)
	n.waitNodeReady(tb)
}

func (n *Node) runKubelet(tb testing.TB) {
	p := n.start(tb, "kubelet", filepath.Join(n.assets, "kubelet"), []string{"PATH=" + n.assets + ":" + os.Getenv("PATH")}, n.kubeletConfig.args...)
	n.mu.Lock()
	n.kubelet = p
	n.mu.Unlock()
}

// RestartKubelet stops kubelet (SIGTERM, as a node upgrade does) and starts
// it again with the same configuration, returning once the Node is Ready
// again. Running containers are not touched by a kubelet restart.
func (n *Node) RestartKubelet(t testing.TB) {
	t.Helper()
	n.take(&n.kubelet).stop(t)
	n.runKubelet(t)
	n.waitNodeReady(t)
}

// waitNodeReady waits until the Node's Ready condition is True and was
// reported by the running kubelet.
func (n *Node) waitNodeReady(tb testing.TB) {
	tb.Helper()
	since := metav1.Now().Rfc3339Copy()
	err := poll.Wait(tb.Context(), startTimeout, func(ctx context.Context) (bool, error) {
		n.mu.Lock()
		p := n.kubelet
		n.mu.Unlock()
		if !p.p.Alive() {
			return false, fmt.Errorf("kubelet exited: %w", p.p.Err())
		}
		node, err := n.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Before(&since) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		tb.Fatalf("nodeenv: node %s did not become Ready: %v\n%s\n%s", n.Name, err, n.LogTail("kubelet"), n.LogTail("containerd"))
	}
}

// freePort is a TCP port free on 127.0.0.1 now.
func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("nodeenv: %v", err)
	}
	defer func() { _ = l.Close() }()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		tb.Fatalf("nodeenv: %v is not a TCP address", l.Addr())
	}
	return addr.Port
}

// KubeletVersion is the version the node's kubelet reports in the Node's
// status (v1.37.1, ...).
func (n *Node) KubeletVersion(tb testing.TB) string {
	tb.Helper()
	node, err := n.Kube.CoreV1().Nodes().Get(tb.Context(), n.Name, metav1.GetOptions{})
	if err != nil {
		tb.Fatalf("nodeenv: reading node %s: %v", n.Name, err)
	}
	if node.Status.NodeInfo.KubeletVersion == "" {
		tb.Fatalf("nodeenv: node %s reports no kubelet version", n.Name)
	}
	return node.Status.NodeInfo.KubeletVersion
}
