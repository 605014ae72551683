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
package registration
