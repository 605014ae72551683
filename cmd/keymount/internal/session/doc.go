// Package session runs keymount's publish pipeline in-process for the
// keymount CLI.
//
// A Session starts the CSI node plugin (package driver) on a temporary unix
// socket, and optionally the local provider on another, then plays kubelet:
// it calls NodePublishVolume and NodeUnpublishVolume over real CSI gRPC with
// the volume context kubelet would send. The driver accepts only kubelet's
// target paths, read-only, so the session keeps a private kubelet root
// (StateDir/kubelet): it publishes each volume at
// pods/<pod UID>/volumes/kubernetes.io~csi/<volume ID>/mount there, and Bind
// shows it read-only on the user's target (Unbind undoes that before
// Unpublish). Closing the session stops both servers and removes the
// sockets; the volumes stay mounted, and their records stay in the state
// directory, so a later session with the same state directory can refresh or
// unpublish them.
//
// The driver runs without a driver.Cluster, so a session never writes to an
// API server (no pod status, no synced Secret, no event), even when its
// classes are read from one.
package session
