// Package restart handles what a refresh cannot reach: containers that do
// not see new files. When a refresh changes the content of a mounted volume,
// a Restarter
//
//   - warns, with an event on the pod, about each container that mounts the
//     volume through subPath or subPathExpr: the kernel bind-mounted the
//     file or directory that was there when the container started, so the
//     container keeps the old content until it restarts;
//   - restarts the pod's workload (its Deployment, StatefulSet or DaemonSet)
//     when the pod or its SecretProviderClass opts in with the annotation
//     rotation.RestartAnnotation ("keymount.io/restart-on-change": "true").
//
// # Once per change
//
// A restart sets the annotation keymount.io/rollout-<class> (AnnotationKey)
// on the workload's pod template, which makes its controller roll the pods
// out as `kubectl rollout restart` does. Its value (AnnotationValue) is
// derived from the new object versions only, so every pod of the workload,
// on every node, that sees the same change derives the same value. The
// workload is read first and nothing is written when the template already
// carries the value; otherwise one JSON merge patch sets that one annotation,
// on condition that the workload is the one read (its uid) and has not
// changed since (its resourceVersion). When two nodes race, one patch wins;
// the other conflicts, reads again and finds the value: however many pods
// refresh, on however many nodes, the template changes once per change.
//
// # API access
//
// The driver links no apps/v1 types and runs no apps informer: a Restarter
// reads the pod's controller chain (its ReplicaSet, then the workload) with
// raw JSON requests of its own, only when a change happened, and decodes
// only the fields it needs. A pod writes its own owner references, so the
// chain is confirmed as the workload controllers confirm it: each
// controller exists with the UID named and its selector matches the pod's
// labels; a pod that claims a workload it does not belong to restarts
// nothing. RBAC for this is the opt-in component
// deploy/components/restart-on-change; without it the Restarter says so in
// an event and its error.
package restart
