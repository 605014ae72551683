package k8senv

import "strings"

// controllers are the kube-controller-manager controllers the environment
// runs: the garbage collector only, so ownerReferences behave as in a
// cluster while nothing else (no namespace, no ServiceAccount controller)
// acts behind a test's back.
const controllers = "garbage-collector-controller"

// controllerManager is kube-controller-manager running the garbage collector
// and the extra controllers.
func controllerManager(extra []string) component {
	return component{
		name: "kube-controller-manager",
		user: "system:kube-controller-manager",
		args: []string{
			"--controllers=" + strings.Join(append([]string{controllers}, extra...), ","),
			"--use-service-account-credentials=false",
		},
	}
}
