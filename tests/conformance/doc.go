// Package conformance holds keymount's own conformance tests of the node
// plugin: the "should work" cases csi-sanity skips for a driver without a
// Controller service, and the promises of the design (atomic refresh, a
// failed refresh keeps the files, state survives a driver restart). Every
// test runs the real driver and the local provider through the harness, on
// real sockets and real tmpfs mounts, and must run as root.
package conformance
