package k8senv

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// shared holds the control planes Shared started in this test binary, one
// per Options, and what stops them when Run's tests are done.
var shared struct {
	mu      sync.Mutex
	main    bool                     // Run runs the tests
	root    string                   // their directories live here; removed by Run
	envs    map[string]*sharedResult // by Options
	cleanup []func()                 // registered by Start, run last first
	failed  bool                     // a test failed: the logs are printed
}

type sharedResult struct {
	env *Env
	err string // why it did not start
}

// Run runs the package's tests, then stops every control plane Shared
// started and removes its directory, and returns the exit code: m.Run's, or
// 1 if stopping a shared control plane failed. A package whose tests call
// Shared has
//
//	func TestMain(m *testing.M) { os.Exit(k8senv.Run(m)) }
func Run(m *testing.M) int {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.failed = code != 0
	stop := sharedTB{st: &sharedStart{}}
	for i := len(shared.cleanup) - 1; i >= 0; i-- {
		shared.cleanup[i]()
	}
	shared.cleanup, shared.envs = nil, nil
	if shared.root != "" {
		if err := os.RemoveAll(shared.root); err != nil {
			stop.Errorf("k8senv: removing the shared control planes' directory: %v", err)
		}
		shared.root = ""
	}
	if stopErrors > 0 && code == 0 {
		code = 1
	}
	return code
}

// stopErrors counts what went wrong while Run stopped the shared control
// planes.
var stopErrors int

// Shared returns the control plane of this test binary started with opts,
// starting it on the first call (which t waits for), and stops it when
// Run's tests are done, not when t ends. opts.Dir must be empty.
//
// Tests that share a control plane share everything cluster-scoped: each
// works in namespaces of its own with names no other test uses (GenerateName),
// and asserts nothing on cluster-scoped objects another test of the package
// may create or change, on the audit log or on the API server's
// availability. A test that needs any of that calls Start, and says why at
// the call.
func Shared(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.Dir != "" {
		t.Fatal("k8senv: Shared: Options.Dir must be empty (the shared control plane's directory is k8senv's)")
	}
	key := sharedKey(opts)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		t.Fatal("k8senv: Shared needs the package's TestMain to run the tests through k8senv.Run, which stops the shared control planes")
	}
	if r, ok := shared.envs[key]; ok {
		if r.env == nil {
			t.Fatalf("k8senv: the shared control plane did not start in an earlier test: %s", r.err)
		}
		return r.env
	}
	if shared.envs == nil {
		shared.envs = map[string]*sharedResult{}
	}
	r := &sharedResult{err: "its start failed (see that test's output)"}
	shared.envs[key] = r
	if shared.root == "" {
		root, err := os.MkdirTemp("", "k8senv-shared-")
		if err != nil {
			t.Fatalf("k8senv: %v", err)
		}
		shared.root = root
	}
	dir, err := os.MkdirTemp(shared.root, "env-")
	if err != nil {
		t.Fatalf("k8senv: %v", err)
	}
	opts.Dir = dir
	// Start reports to t while it starts (a failure fails t), and leaves
	// its cleanups, temporary directories and failure logs to Run.
	st := &sharedStart{t: t, dir: dir}
	defer func() { st.t = nil }() // also when Start fails t
	r.env = Start(sharedTB{st: st}, opts)
	return r.env
}

// sharedKey identifies opts.
func sharedKey(opts Options) string {
	crds := make([]string, 0, len(opts.CRDDirectoryPaths))
	for _, p := range opts.CRDDirectoryPaths {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		crds = append(crds, p)
	}
	slices.Sort(crds)
	opts.CRDDirectoryPaths = crds
	opts.Controllers = slices.Sorted(slices.Values(opts.Controllers))
	return fmt.Sprintf("%#v", opts)
}

// sharedTB is the testing.TB Start gets for a shared control plane: while
// it starts, failures and logs go to the test that asked for it; its
// cleanups run, and its logs go to stderr, when Run stops it after the
// tests, when there is no test any more (a failure then fails Run).
type sharedTB struct {
	testing.TB // nil: only for testing.TB's unexported method
	st         *sharedStart
}

type sharedStart struct {
	t   testing.TB // the test waiting for the start; nil once it returned
	dir string
}

func (s sharedTB) Helper() {
	if s.st.t != nil {
		s.st.t.Helper()
	}
}

// Cleanup registers f with Run; Shared holds shared.mu while Start runs.
func (s sharedTB) Cleanup(f func()) { shared.cleanup = append(shared.cleanup, f) }

func (s sharedTB) TempDir() string {
	dir, err := os.MkdirTemp(s.st.dir, "tmp-")
	if err != nil {
		s.Fatalf("k8senv: %v", err)
	}
	return dir
}

func (s sharedTB) Name() string { return "k8senv-shared" }

func (s sharedTB) Failed() bool {
	if s.st.t != nil {
		return s.st.t.Failed()
	}
	return shared.failed || stopErrors > 0
}

func (s sharedTB) Logf(format string, args ...any) {
	if s.st.t != nil {
		s.st.t.Logf(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (s sharedTB) Errorf(format string, args ...any) {
	if s.st.t != nil {
		s.st.t.Errorf(format, args...)
		return
	}
	stopErrors++
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (s sharedTB) Fatalf(format string, args ...any) {
	if s.st.t != nil {
		s.st.t.Fatalf(format, args...)
		return
	}
	s.Errorf(format, args...)
}

func (s sharedTB) Fatal(args ...any) { s.Fatalf("%s", fmt.Sprint(args...)) }
