// Package e2e is keymount's end-to-end suite: the driver and the local
// provider run as the binaries a cluster runs, against a real kube-apiserver,
// etcd and kube-controller-manager (package tests/k8senv), and the tests do
// what kubelet does.
//
// For every pod a test creates the Pod object (bound to the test's node, with
// inline CSI volumes of the driver secrets-store.csi.k8s.io), mints its
// service account tokens with the TokenRequest API as the CSIDriver object
// asks, reads its nodePublishSecretRef Secret, and calls NodePublishVolume and
// NodeUnpublishVolume over the driver's unix socket with kubelet's target
// path, volume ID and volume context. The driver authenticates as
// system:serviceaccount:kube-system:keymount, bound to the ClusterRoles and
// ClusterRoleBindings of deploy/rbac.yaml and
// deploy/components/secret-sync/rbac.yaml exactly as shipped, so a test that
// passes proves the shipped RBAC is enough. The API server's audit log shows
// what the driver asked for: its list and watch requests must be
// node-scoped.
//
// The driver answers kubelet before it writes pod statuses and synced
// Secrets (from a queue, retried with backoff) and events: the tests wait
// for what they expect to see, and a test that checks that something was
// not written first waits for proof that the driver handled the call (the
// expected state, its request in the audit log, or its log line about the
// pod status).
//
// Each test runs its own node: a directory standing in for the host (kubelet
// root, provider sockets, the driver's state), a driver and a provider
// process. Cleanup stops the processes (SIGTERM, then SIGKILL), unmounts
// everything left under the node's directory and fails the test if a driver
// or provider log holds a secret value the node was given.
//
// Tokens in logs (CVE-2023-2878): every keymount process runs at -v=10 and
// logs into one directory that outlives the tests. The tests register every
// secret value they use: object contents, the service account tokens they
// mint, nodePublishSecretRef data, values stored in moto, the data of the
// Secrets they read. After the last test TestMain scans every log for them
// (as is, base64, JSON-escaped or quoted, as a klog multi-line value, inside
// hex dumps) and fails the run on any hit, naming the file, the line and
// the value's label, never the value; it fails too when it had no value or
// no byte of log to scan.
//
// The binaries are built and the control plane started once per package,
// by the first test that needs them (so the setup runs under go test's
// -timeout and its failure fails every test), and stopped by TestMain after
// the last test, which then checks that no process and no mount is left.
// The control plane is k8senv's: etcd, kube-apiserver with an audit log,
// and kube-controller-manager for the garbage collector.
//
// The suite runs as root (the driver mounts tmpfs) and needs
// KUBEBUILDER_ASSETS (see tests/k8senv). It never skips: without them, every
// test fails.
//
//	KUBEBUILDER_ASSETS=$(hack/install-k8s.sh --print-assets-dir) go test -count=1 ./tests/e2e
//
// With the build tag vault (vault_test.go), a real Vault dev server
// (tests/vaultenv, VAULT_BIN) joins: pods mount a vault-csi-provider class
// through the driver and keymount-provider-vault binaries, and the
// keymount-controller binary syncs a SecretSync through a provider sidecar.
//
//	VAULT_BIN=$(bash hack/install-vault.sh --print-path) go test -count=1 -tags vault -run '^TestVault' ./tests/e2e
package e2e
