//go:build tools

// Package k8s pins the Kubernetes programs the integration test environment
// runs: kube-apiserver, and kube-controller-manager for the garbage
// collector. hack/install-k8s.sh builds them from this module; the imports
// below only keep `go mod tidy` from dropping them (a program cannot be
// imported, hence the build tag that no build sets).
package k8s

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
