package k8senv

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/keymount/keymount/tests/maintb"
)

// shared holds the control planes Shared started in this test binary, one
// per Options, on one package-wide testing.TB whose cleanups Run runs after
// the tests.
var shared struct {
	mu   sync.Mutex
	tb   *maintb.TB // set by Run
	envs map[string]*sharedResult
}

type sharedResult struct {
	env *Env
	err error // why it did not start
}

// Run runs the package's tests, then stops every control plane Shared
// started and removes its directory, and returns the exit code: m.Run's, or
// 1 if stopping a shared control plane failed. A package whose tests call
// Shared has
//
//	func TestMain(m *testing.M) { os.Exit(k8senv.Run(m)) }
func Run(m *testing.M) int {
	tb := maintb.New("k8senv shared")
	shared.mu.Lock()
	shared.tb = tb
	shared.mu.Unlock()
	code := m.Run()
	if code != 0 {
		tb.MarkFailed() // the control planes' cleanups print their logs' ends
	}
	tb.RunCleanups()
	shared.mu.Lock()
	shared.envs = nil
	shared.mu.Unlock()
	if tb.Failed() && code == 0 {
		code = 1
	}
	return code
}

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
	if shared.tb == nil {
		t.Fatal("k8senv: Shared needs the package's TestMain to run the tests through k8senv.Run, which stops the shared control planes")
	}
	r, ok := shared.envs[key]
	if !ok {
		if shared.envs == nil {
			shared.envs = map[string]*sharedResult{}
		}
		r = &sharedResult{}
		shared.envs[key] = r
		// Its start reports to the package-wide TB (stderr), which also
		// holds its cleanups and directory until Run stops it.
		r.err = shared.tb.Run(func() {
			opts.Dir = shared.tb.TempDir()
			r.env = Start(shared.tb, opts)
		})
	}
	if r.env == nil {
		t.Fatalf("k8senv: the shared control plane did not start: %v", r.err)
	}
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
