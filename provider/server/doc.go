// Package server is a small kit for writing Secrets Store CSI providers.
//
// A provider implements [Provider]: it receives a [MountRequest] parsed once
// from the wire (attributes, secrets and permission already decoded) and
// returns the files to mount and the version of every object. The kit serves
// the v1alpha1 CSIDriverProvider gRPC service on <SocketDir>/<Name>.sock,
// answers Version, turns provider errors into gRPC status codes and logs each
// failed call once.
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
