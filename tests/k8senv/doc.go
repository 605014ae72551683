// Package k8senv starts a real Kubernetes control plane for the integration
// and end-to-end test tiers: etcd and kube-apiserver through
// controller-runtime's envtest, and optionally kube-controller-manager for
// the garbage collector and kube-scheduler to bind pods to nodes, all
// listening on 127.0.0.1 only.
//
//	env := k8senv.Start(t, k8senv.Options{
//		CRDDirectoryPaths: []string{"../../deploy/crds"},
//		AuditLog:          true,
//		ControllerManager: true,
//		Scheduler:         true,
//	})
//	client := kubernetes.NewForConfigOrDie(env.Config) // system:masters
//	path, cfg := env.KubeconfigFor(t, "system:node:node-1", []string{"system:nodes"})
//	events := env.AuditEvents(t)
//
// StopAPIServer and StartAPIServer take kube-apiserver down and bring it back
// on the same address with the same certificates (etcd keeps running), so a
// test can prove what happens to clients while the API server is away:
//
//	env.StopAPIServer(t)
//	// ... connections to env.Config.Host are refused ...
//	env.StartAPIServer(t) // clients made before work again
//
// The binaries come from KUBEBUILDER_ASSETS, the directory `make k8s-env`
// fills (hack/install-k8s.sh: kube-apiserver, kube-controller-manager and
// kube-scheduler built from hack/k8s, etcd from Debian's etcd-server).
// `make test` sets the variable; to run a test by hand:
//
//	make k8s-env
//	KUBEBUILDER_ASSETS=$(hack/install-k8s.sh --print-assets-dir) go test ./tests/...
//
// A test whose environment cannot start fails; it never skips.
//
// Each start costs seconds of CPU, so a package's tests share one control
// plane where they can: Shared starts it on first use, once per Options in
// the test binary, and the package's TestMain (k8senv.Run)
// stops it after the tests, leaving no process or directory behind:
//
//	func TestMain(m *testing.M) { os.Exit(k8senv.Run(m)) }
//
//	env := k8senv.Shared(t, k8senv.Options{CRDDirectoryPaths: crds})
//
// Tests sharing it work in namespaces of their own (GenerateName) and assert
// nothing on cluster-scoped state. A test keeps its own Start, with one
// comment line at the call saying why, when it installs cluster-scoped
// objects that would clash or that it asserts on (CRDs of other versions,
// webhooks, admission policies, RBAC), stops the API server, counts audit
// events, needs kube-controller-manager's flags, or runs a controller that
// watches every namespace, where another test's objects would reach it.
//
// Service account tokens come from the real TokenRequest API (envtest
// configures the signing key and the issuer). envtest disables the
// ServiceAccount admission plugin, so a Pod's spec.serviceAccountName is not
// defaulted and no "default" ServiceAccount is created: set it, and create
// the ServiceAccount, yourself (or set Options.ServiceAccountAdmission).
//
// Everything is stopped by t.Cleanup. The processes also die with the test
// binary, even when it is killed or times out: they are started with a
// parent-death signal from one OS thread that lives as long as the
// environment. Linux only.
package k8senv
