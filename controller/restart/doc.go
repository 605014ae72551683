// Package restart is keymount-controller's restart on change: it restarts
// workloads whose pods would otherwise keep old secrets. The node driver
// takes no part but a report: it holds no rule on workloads, and says in
// the pod status of a volume that a refresh changed its content (condition
// ContentChanged=True with the new object versions, package
// cluster/podstatus). SetupWithManager adds two reconcilers to the
// controller's manager:
//
//   - on pod statuses that report a change: the pod is read from the API
//     server and must be the one the status's owner reference names and
//     mount the status's class with keymount's driver; when the pod or its
//     SecretProviderClass opts in with rotation.RestartAnnotation
//     ("keymount.io/restart-on-change": "true"), its Deployment,
//     StatefulSet or DaemonSet is restarted (Restarter);
//   - on Secrets a SecretSync wrote (label SyncLabel): the Deployments,
//     StatefulSets and DaemonSets that opted in (the annotation on the
//     workload or its pod template) and read the Secret through env,
//     envFrom or a volume are restarted once per change of its data.
//
// # Once per change
//
// A restart sets an annotation on the workload's pod template, which makes
// its controller roll the pods out as `kubectl rollout restart` does:
// keymount.io/rollout-<class> (AnnotationKey) with a value derived from the
// new object versions only (AnnotationValue), or
// keymount.io/rollout-secret-<Secret> (SecretAnnotationKey) with an
// HMAC-SHA256 of the Secret's type and data keyed with the controller's key
// (secretAnnotationValue): deterministic, so every pod and replica that
// sees the same change derives the same value, and keyed, so the annotation
// tells nothing about the values. The workload is read first and nothing
// is written when the template already carries the value; otherwise one
// JSON merge patch sets that one annotation, on condition that the workload
// is the one read (its uid) and has not changed since (its
// resourceVersion). However many pods report a change, the template changes
// once per change. A pod older than the workload's last restart for the
// class (its own copy of the annotation differs from the template's)
// reports nothing new (Result.Stale): a pod still terminating never rolls
// the workload back. A workload never restarted for a Secret is restarted
// only for a change the controller's cache saw (it held the content
// before), when it was created no later than the second of that change
// (the API server's times, to the second: in the second of the change
// either content may have started, so it restarts). The change is found as the cache gets each
// version (SecretDigests), not when the reconciler first looks: its queue
// folds a creation and a change into one request when it runs late.
//
// # API access and cost
//
// The reconcilers keep their own cache, each type trimmed as it enters:
// pod statuses to the report, Secrets (only those with SyncLabel) to their
// metadata and digest, never their data, and every Deployment, StatefulSet
// and DaemonSet (the API server cannot select by annotation) to its
// identity and the names of the Secrets it consumes when it opted in. Pods,
// classes and the owner chain are read with the API server only for a
// reported change, with raw JSON requests that decode only the fields
// needed. A pod writes its own owner references, so the chain is confirmed
// as the workload controllers confirm it: each controller exists with the
// UID named and its selector matches the pod's labels; a pod that claims a
// workload it does not belong to restarts nothing. The RBAC is
// RBACComponent, bound to the controller's ServiceAccount; without it
// SetupWithManager leaves restart on change off and logs the missing rule.
package restart
