// Package cluster connects the node plugin to the Kubernetes API: it
// resolves SecretProviderClasses, writes pod statuses, syncs Secrets and
// emits events on pods, behind the driver.Cluster interface.
//
// Every watch is scoped so memory does not grow with the cluster: pods by
// spec.nodeName, pod statuses by the node label, Secrets by the managed
// label (and only when Secret sync is on). SecretProviderClasses are
// watched cluster-wide; they are few and small. The cache refuses reads of
// any other type, so no code path can start a cluster-wide watch by
// accident.
package cluster
