// Package nodeenv runs a real Kubernetes node for the real-node test tier
// (tests/node): etcd, kube-apiserver and kube-controller-manager (through
// tests/k8senv), containerd with runc, kubelet, and keymount's driver and
// local provider as host processes, all on 127.0.0.1 and all under one
// temporary root.
//
// What it takes on machines of this kind (see ../shared/DESIGN.md, "A real
// node"): containerd from Debian, started with its root, state and socket
// under the temporary root, cgroupfs, AppArmor off and
// restrict_oom_score_adj (the VMs lack CAP_SYS_RESOURCE); a CNI config with
// only the loopback plugin (test pods use hostNetwork); kubelet built from
// a pinned k8s.io/kubernetes module (hack/k8s, the newest version, or
// hack/k8s-oldest, which `make test-node-oldest` runs: the same configuration
// serves both) with failCgroupV1: false,
// failSwapOn: false, its API on 127.0.0.1 and a cgroup root of its own; and
// the one container image the tier needs, keymount.test/probe (the static
// program tests/node/probe, packed by internal/ociimage and imported with
// `ctr images import`), which is also the pod sandbox image. Nothing is
// pulled from a registry.
//
// With Options.Helm the node runs keymount as a cluster does instead:
// `helm install` of deploy/charts/keymount, the driver and the local
// provider as DaemonSet pods from images packed from the work tree (see
// helm.go for what that adds to the node).
//
// Start fails the test when any part cannot start; it never skips. When the
// test ends the node is taken down in order (pods, keymount, kubelet,
// containerd and its shims, the control plane) and Leftovers must then find
// no process, mount or cgroup of the node.
//
// Every binary comes from KUBEBUILDER_ASSETS (`make k8s-env`, which
// hack/install-k8s.sh fills: kubelet, containerd, runc, the CNI plugins and
// the control plane), except keymount's own, built from the work tree.
package nodeenv
