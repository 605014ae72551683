// Package rotation holds what happens to a mounted volume after its first
// publish: deciding when a volume is refreshed, the refresh itself, mirroring
// the mounted files into Kubernetes Secrets (package secretsync) and
// restarting workloads that cannot see new files.
//
// Kubelet re-calls NodePublishVolume about once a minute for a CSIDriver with
// requiresRepublish; those calls are the heartbeat. Each sub-package does one
// of the jobs above and is composed into the driver's cluster side.
package rotation
