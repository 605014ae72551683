// Package secretmirror serves mirrors.kts.studio SecretMirrors (ktsstudio/mirrors'
// API, its manifests unchanged): it copies the source Secret of a
// SecretMirror's namespace into every namespace whose name matches one of
// its regular expressions, keeps the copies in step (every
// pollPeriodSeconds, at once when a namespace appears, the source changes or
// a copy is edited), removes the copies it wrote when their namespace stops
// matching or, with deletePolicy delete, when the SecretMirror goes, and
// never writes over a Secret it did not write.
//
// It watches only SecretMirrors, namespace metadata, the copies it wrote
// (by label) and the source Secrets SecretMirrors name (one watch each,
// by name): never every Secret of the cluster.
//
// Event reasons and status messages are in reasons.go.
package secretmirror
