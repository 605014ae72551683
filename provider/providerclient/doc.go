// Package providerclient is the client for provider plugins, shared by the
// node driver and keymount-controller.
//
// A provider plugin serves the v1alpha1.CSIDriverProvider gRPC service on a
// unix socket named <dir>/<provider>.sock. Client finds that socket by
// searching its configured directories in order (the additional provider
// paths first, then the main provider directory; the first socket found
// wins), keeps one gRPC connection per socket, and calls Mount and Version
// with a per-call deadline, and Unpublish of keymount's provider extension
// (keymount.provider.v1, package provider/keymountv1) on the same socket.
//
// The socket is looked up again on every call, so a provider that restarts or
// moves to another directory is found without restarting the driver.
//
// Errors are returned, never logged, and keep what the driver needs to answer
// kubelet with a real gRPC code: sentinel errors for a bad provider name, a
// missing provider and an invalid response; *ProviderError for a failed call
// or a response carrying an error code; the context's error when the deadline
// passes or the caller cancels. Every error that stands for a gRPC code
// implements GRPCStatus, so status.Code works through %w wrapping.
package providerclient
