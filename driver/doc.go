// Package driver implements keymount's CSI node plugin: the Identity and
// Node services and the publish pipeline that turns a NodePublishVolume call
// into files in a tmpfs volume.
//
// The pipeline (publish.go) reads top to bottom: validate the request,
// resolve the SecretProviderClass, build the provider's MountRequest, make
// sure the volume is mounted, call the provider, write the files atomically,
// record what was mounted. Inner packages return wrapped Go errors; only the
// CSI handlers turn them into gRPC statuses, through toStatus (errors.go).
package driver
