//go:build tools

// Package k8s pins the Kubernetes programs the test environments run:
// kube-apiserver, kube-controller-manager for the garbage collector,
// kube-scheduler, and the kubelet of the real-node tier (tests/node).
// hack/install-k8s.sh builds them from this module; the imports
// below only keep `go mod tidy` from dropping them (a program cannot be
// imported, hence the build tag that no build sets).
package k8s

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
