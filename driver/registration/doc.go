// Package registration registers the driver with kubelet's plugin watcher,
// in place of the node-driver-registrar sidecar.
//
// kubelet watches its plugins_registry directory for unix sockets; for each
// one it calls the Registration service's GetInfo, learns the plugin's type
// (CSIPlugin), name and CSI endpoint, and answers with
// NotifyRegistrationStatus. Serve puts such a socket into that directory and
// keeps it there: when the socket disappears (kubelet restarted and cleaned
// the directory, or someone removed it) it is created again, which makes
// kubelet register the driver anew.
//
// Serve records in a Status what the node-driver-registrar's /healthz used to
// tell: Status.Check fails while kubelet's last answer was a refusal or while
// the socket is missing and not yet created again, so the driver's liveness
// probe can restart it. Before kubelet answers at all the registration counts
// as healthy: kubelet may take a while to find the socket.
package registration
