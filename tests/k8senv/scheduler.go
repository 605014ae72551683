package k8senv

// scheduler is kube-scheduler with its default profile: it binds pods that
// have no spec.nodeName (a DaemonSet's, a Deployment's) to a Ready node
// with room for them. No node exists until a test creates or runs one.
func scheduler() component {
	return component{name: "kube-scheduler", user: "system:kube-scheduler"}
}
