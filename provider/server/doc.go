// Package server is a small kit for writing Secrets Store CSI providers.
//
// A provider implements [Provider]: it receives a [MountRequest] parsed once
// from the wire (attributes, secrets and permission already decoded) and
// returns the files to mount and the version of every object. The kit serves
// the v1alpha1 CSIDriverProvider gRPC service on <SocketDir>/<Name>.sock,
// answers Version and gRPC's standard health check (grpc.health.v1.Health,
// which the provider binaries' --probe asks), turns provider errors into
// gRPC status codes and logs each failed call once. A provider that also
// sets Config.Unpublisher hears of every volume keymount's driver
// unmounted: the kit serves keymount's
// provider extension (keymount.provider.v1.VolumeLifecycle, package
// provider/keymountv1) on the same socket and hands it an [UnpublishRequest]
// whose pod UID, volume name and target path it has checked.
//
// Errors a provider returns keep their gRPC code when they already carry one;
// otherwise they are classified with errors.Is against [ErrNotFound],
// [ErrPermissionDenied], [ErrInvalidParameters], [ErrFailedPrecondition] and
// [ErrUnavailable]; context cancellation and
// deadlines keep their meaning; anything else is Internal. A failed mount never
// reaches the driver as codes.Unknown.
//
// Error messages travel to the driver and end up in pod events: they must
// never contain secret values or file contents.
package server
