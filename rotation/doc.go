// Package rotation is the refresh policy, and only that: whether a mounted
// volume (or, in the controller, a synced Secret) is due for a refresh,
// decided from its record, the node's defaults, and the policy and trigger
// annotations of its class and pod (keymount.io/rotation-policy,
// keymount.io/rotation-interval, keymount.io/refresh, ...). It parses and
// validates those annotations and returns a Decision; it performs nothing.
//
// The refresh itself is the driver's (package driver); mirroring files into
// Kubernetes Secrets and restarting workloads are the API-server side's
// (packages cluster/secretobjects and controller/restart).
//
// Kubelet re-calls NodePublishVolume about once a minute for a CSIDriver with
// requiresRepublish; those calls are the heartbeat this policy is asked at.
//
// rotation is a leaf: it imports nothing of keymount but apis/ (a lint rule
// in .golangci.yml enforces it), so the driver, the cluster side and the
// controller all share one policy.
package rotation
