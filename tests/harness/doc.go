// Package harness runs keymount's CSI node plugin in-process for the test
// tiers under tests/: the csi-sanity suite, the conformance tests and the
// benchmarks.
//
// Start wires real parts only: the local provider served by the provider kit
// on a real unix socket, the driver on a real unix socket with a FileResolver
// over a class directory, and a volume manager that mounts real tmpfs
// volumes under a state directory. Everything lives in one short temporary
// directory (unix socket paths are limited to 108 bytes) that is removed when
// the test ends, after every mount left below it has been unmounted, so a
// failing test never leaks mounts into the next one.
//
// The harness calls the driver the way kubelet does: target paths
// <base>/pods/<pod UID>/volumes/kubernetes.io~csi/<volume>/mount, volume IDs
// "csi-" + hex(sha256(pod UID + volume name)), and the volume context of an
// inline volume of a CSIDriver with podInfoOnMount.
//
// Tests must run as root: the driver mounts tmpfs and bind mounts.
package harness
