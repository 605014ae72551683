// Package hostile is keymount's hostile-provider and hostile-request suite
// (issue 7 point 11). Every test runs the real driver over real unix sockets
// and real tmpfs mounts, and must run as root.
//
// The provider is scriptable: each test sets what it answers (traversal
// names, out-of-range modes, megabyte error messages, responses above the
// receive limit, ten thousand files, no files), makes it hang until the
// driver gives up, or runs it as a child process of the test binary that
// exits in the middle of a call. The requests are hostile too: read-write
// volumes, targets of other pods, symlinked kubelet directories, volume IDs
// with "/", ".." and NUL, edited volume records, foreign files and mounts
// where kubelet's target paths are.
//
// Security regressions are named after the vulnerability class they guard:
// TestCVE2020_8567ProviderPathTraversal (a provider must not write outside
// the volume) and TestCVE2020_8568StoredTargetPathNotTrusted (a stored
// target path must never lead the driver to unmount or remove anything but
// its own volume).
//
// TestAWSProviderProvesEveryToken attacks the real keymount-provider-aws
// over its socket, against moto_server and a real kube-apiserver: after a
// legitimate mount warmed every cache, each bad service account token
// (garbage, expired, not yet valid, wrong audience, other service account,
// other pod, foreign issuer, alg none, none at all) is refused and costs no
// AWS request.
//
// The crash test builds cmd/keymount-driver and SIGKILLs it during 200
// changing republishes; the concurrency test sends 200 publishes and
// unpublishes at once.
package hostile
