package k8senv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// AssetsEnv names the directory holding kube-apiserver, etcd,
// kube-controller-manager and kube-scheduler; `make k8s-env` fills it and
// `make test` sets it.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// loopback is the only address anything here listens on.
const loopback = "127.0.0.1"

// startTimeout bounds the start of each process (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler): envtest's default (20s) is short
// for a 2-core machine that also runs other tests.
const startTimeout = 90 * time.Second

// Options choose what Start runs besides etcd and kube-apiserver.
type Options struct {
	// CRDDirectoryPaths are files or directories of CustomResourceDefinition
	// manifests to install before Start returns. A missing path fails.
	CRDDirectoryPaths []string
	// AuditLog makes kube-apiserver log every request at the Metadata level
	// (synchronously, before it answers), for AuditEvents.
	AuditLog bool
	// ControllerManager also runs kube-controller-manager with the garbage
	// collector, so dependents whose owners are gone are deleted.
	ControllerManager bool
	// Controllers are kube-controller-manager controllers to run besides
	// the garbage collector (e.g. "job-controller"), with ControllerManager.
	Controllers []string
	// ServiceAccountTokenSecrets also runs kube-controller-manager's
	// serviceaccount-token-controller with kube-apiserver's service account
	// signing key, as in a cluster: it fills in each Secret of type
	// kubernetes.io/service-account-token (token, ca.crt, namespace). It
	// implies ControllerManager.
	ServiceAccountTokenSecrets bool
	// Scheduler also runs kube-scheduler, so pods without spec.nodeName
	// (e.g. DaemonSet pods) are bound to a node. Admission taints every new
	// Node node.kubernetes.io/not-ready:NoSchedule until
	// node-lifecycle-controller (run only if in Controllers) removes it
	// from a Ready node: while it stays, only pods that tolerate it are
	// bound (keymount's chart tolerates every taint; a DaemonSet's default
	// tolerations do not cover it).
	Scheduler bool
	// ServiceAccountAdmission turns kube-apiserver's ServiceAccount
	// admission plugin back on (envtest disables it), as in a cluster: a pod
	// gets its namespace's "default" ServiceAccount when it names none and,
	// unless it opts out, the projected API credentials volume
	// (kube-api-access-*) in-cluster clients read. The ServiceAccount a pod
	// names must exist.
	ServiceAccountAdmission bool
	// Dir is where the control plane keeps its data, certificates and logs;
	// empty means a new t.TempDir(). Its removal is the caller's.
	Dir string
}

// Env is a running control plane. Its processes stop when the test that
// started it ends.
type Env struct {
	// Config is a client configuration for an administrator (user "admin",
	// group system:masters). Copy it before changing it.
	Config *rest.Config
	// Envtest is the underlying environment: Envtest.ControlPlane has the
	// etcd and kube-apiserver URLs. Cleanup stops it; do not.
	Envtest *envtest.Environment

	auditLog string
	owner    *processOwner // starts kube-apiserver again (StartAPIServer)

	// apiServerMu serializes what touches envtest's APIServer: AddUser (not
	// safe for concurrent use), StopAPIServer and StartAPIServer.
	apiServerMu sync.Mutex
	stopped     *portHold // the port of a stopped kube-apiserver; nil while it runs
}

// Start starts etcd and kube-apiserver (and, with opts.ControllerManager,
// kube-controller-manager, with opts.Scheduler, kube-scheduler) on 127.0.0.1
// and returns once they serve. It fails the test when KUBEBUILDER_ASSETS is
// unset or lacks a binary, or when anything does not start.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	assets := assetsDir(t)
	dir := opts.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	logs := newLogSet(t, filepath.Join(dir, "logs"))

	owner := newProcessOwner()
	t.Cleanup(owner.stop) // registered first, so it runs last

	wrappers := mkdir(t, dir, "bin")
	etcdPath := wrap(t, wrappers, filepath.Join(assets, "etcd"))
	apiServerPath := wrap(t, wrappers, filepath.Join(assets, "kube-apiserver"))

	noExistingCluster := false
	te := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		UseExistingCluster:       &noExistingCluster,
		CRDDirectoryPaths:        opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	// etcd's data and kube-apiserver's certificates live in the test's
	// temporary directory, like everything else.
	te.ControlPlane.Etcd = &envtest.Etcd{
		Path:    etcdPath,
		DataDir: mkdir(t, dir, "etcd"),
		Out:     logs.open("etcd"),
		Err:     logs.open("etcd"),
	}
	// envtest picks free ports on "localhost", which resolves to 127.0.0.1,
	// for etcd (--listen-client-urls, --listen-peer-urls) and kube-apiserver
	// (--secure-port); kube-apiserver's addresses are pinned here too.
	api := te.ControlPlane.GetAPIServer()
	api.Path = apiServerPath
	api.CertDir = mkdir(t, dir, "kube-apiserver")
	api.Out, api.Err = logs.open("kube-apiserver"), logs.open("kube-apiserver")
	args := api.Configure()
	args.Set("bind-address", loopback)
	// Left alone, kube-apiserver would advertise the host's first address in
	// the "kubernetes" Service's endpoints; the endpoint reconciler refuses a
	// loopback address, and nothing here needs those endpoints.
	args.Set("advertise-address", loopback)
	args.Set("endpoint-reconciler-type", "none")
	// Stopped, kube-apiserver drains its short requests, then gives open
	// connections (watches: informers keep them for half an hour) 2s to
	// close, not --request-timeout's 60s, before it exits: StopAPIServer
	// and the cleanup return in seconds. Requests arriving while it drains
	// get 429 with Retry-After, which clients retry.
	args.Set("shutdown-send-retry-after", "true")
	if opts.ServiceAccountAdmission {
		args.Disable("disable-admission-plugins")
	}

	env := &Env{Envtest: te, owner: owner}
	if opts.AuditLog {
		env.auditLog = configureAudit(t, dir, args)
	}

	t.Cleanup(func() {
		env.releasePort()
		if err := te.Stop(); err != nil {
			t.Errorf("k8senv: stopping etcd and kube-apiserver: %v", err)
		}
	})
	var err error
	begin := time.Now()
	owner.run(func() { env.Config, err = te.Start() })
	if err != nil {
		t.Fatalf("k8senv: starting etcd and kube-apiserver from %s: %v", assets, err)
	}
	t.Logf("k8senv: control plane started in %s", time.Since(begin).Round(time.Millisecond))

	if opts.ControllerManager || opts.ServiceAccountTokenSecrets {
		extra := opts.Controllers
		if opts.ServiceAccountTokenSecrets {
			extra = append(slices.Clone(extra), "serviceaccount-token-controller")
		}
		cm := controllerManager(extra)
		if opts.ServiceAccountTokenSecrets {
			// envtest's kube-apiserver signs and verifies tokens with the key
			// pair it writes into its CertDir (sa-signer.key).
			cm.args = append(cm.args, "--service-account-private-key-file="+filepath.Join(te.ControlPlane.APIServer.CertDir, "sa-signer.key"))
		}
		env.startComponent(t, cm, assets, dir, logs)
	}
	if opts.Scheduler {
		env.startComponent(t, scheduler(), assets, dir, logs)
	}
	return env
}

// KubeconfigFor provisions a client certificate for user in groups (no
// permission comes with it: bind roles with Config) and returns a kubeconfig
// file and a client configuration that authenticate as that user. The file
// is removed when the test ends.
func (e *Env) KubeconfigFor(t testing.TB, user string, groups []string) (path string, cfg *rest.Config) {
	t.Helper()
	e.apiServerMu.Lock()
	defer e.apiServerMu.Unlock()
	u, err := e.Envtest.AddUser(envtest.User{Name: user, Groups: groups}, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		t.Fatalf("k8senv: provisioning user %q: %v", user, err)
	}
	data, err := u.KubeConfig()
	if err != nil {
		t.Fatalf("k8senv: kubeconfig for user %q: %v", user, err)
	}
	path = filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("k8senv: %v", err)
	}
	return path, rest.CopyConfig(u.Config())
}

// assetsDir returns KUBEBUILDER_ASSETS once it holds every binary Start
// may run, whatever the options ask for: `make k8s-env` installs them all,
// and an environment that lacks one is out of date.
func assetsDir(t testing.TB) string {
	t.Helper()
	const fix = "run `make k8s-env` and set " + AssetsEnv + "=$(hack/install-k8s.sh --print-assets-dir), or run the tests through `make test`"
	dir := os.Getenv(AssetsEnv)
	if dir == "" {
		t.Fatalf("k8senv: %s is not set: %s", AssetsEnv, fix)
	}
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		info, err := os.Stat(filepath.Join(dir, b)) //nolint:gosec // G703: KUBEBUILDER_ASSETS is the developer's own setting
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("k8senv: %s=%s lacks %s: %s", AssetsEnv, dir, strings.Join(missing, ", "), fix)
	}
	return dir
}

func wrap(t testing.TB, dir, binary string) string {
	t.Helper()
	path, err := deathSignalWrapper(dir, binary)
	if err != nil {
		t.Fatalf("k8senv: %v", err)
	}
	return path
}

// mkdir creates dir/name and returns it.
func mkdir(t testing.TB, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatalf("k8senv: %v", err)
	}
	return path
}
