// Package metrics is keymount-driver's Prometheus metrics: the upstream
// Secrets Store CSI Driver's names and labels (node_publish_total,
// rotation_reconcile_total, ...), so that existing dashboards and alerts
// keep working, and keymount's own, prefixed keymount_. It implements
// driver.Metrics and secretsync.WriteObserver on a registry of its own
// (with the Go and process collectors), served by Handler.
package metrics
