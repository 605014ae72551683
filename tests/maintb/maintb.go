// Package maintb is the testing.TB of a test package's shared setup: an
// environment started once in TestMain (a control plane, a node) registers
// its cleanups on it and outlives every test.
package maintb

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
)

// TB is the testing.TB of a package-wide setup: tests/k8senv takes a
// testing.TB and registers its cleanups on it, and the environment must
// outlive every test, so it cannot be any test's T. Cleanups run once from
// TestMain (Cleanup), after every test.
//
// Fatal and FailNow end the setup function (see Run) instead of a
// goroutine; Skip is a failure, since these suites never skip.
type TB struct {
	// testing.TB is nil: embedding it satisfies the interface's unexported
	// method. Every exported method is implemented below, so none reaches it.
	testing.TB

	name string
	ctx  context.Context
	stop context.CancelFunc

	mu       sync.Mutex
	failed   bool
	cleanups []func()
	errs     []string
}

// fatalPanic is what Fatal panics with, for run to recover.
type fatalPanic struct{}

// New returns a TB whose messages are prefixed with name.
func New(name string) *TB {
	ctx, stop := context.WithCancel(context.Background())
	return &TB{name: name, ctx: ctx, stop: stop}
}

// Run calls f, which may call Fatal, and returns the failures it reported.
func (m *TB) Run(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(fatalPanic); !ok {
				panic(r)
			}
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.errs) > 0 {
			err = fmt.Errorf("%s", strings.Join(m.errs, "\n"))
		}
	}()
	f()
	return nil
}

// RunCleanups cancels Context and runs the cleanups, last registered first.
func (m *TB) RunCleanups() {
	m.stop()
	for {
		m.mu.Lock()
		if len(m.cleanups) == 0 {
			m.mu.Unlock()
			return
		}
		f := m.cleanups[len(m.cleanups)-1]
		m.cleanups = m.cleanups[:len(m.cleanups)-1]
		m.mu.Unlock()
		f()
	}
}

func (m *TB) report(msg string) {
	m.mu.Lock()
	m.failed = true
	m.errs = append(m.errs, msg)
	m.mu.Unlock()
	fmt.Fprintf(os.Stderr, "%s: %s\n", m.name, msg)
}

// Cleanup registers f to run at RunCleanups.
func (m *TB) Cleanup(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cleanups = append(m.cleanups, f)
}

// Error records a failure.
func (m *TB) Error(args ...any) { m.report(fmt.Sprint(args...)) }

// Errorf records a failure.
func (m *TB) Errorf(format string, args ...any) { m.report(fmt.Sprintf(format, args...)) }

// Fail records a failure.
func (m *TB) Fail() { m.report("failed") }

// FailNow records a failure and ends the setup function.
func (m *TB) FailNow() { m.Fail(); panic(fatalPanic{}) }

// Fatal records a failure and ends the setup function.
func (m *TB) Fatal(args ...any) { m.Error(args...); panic(fatalPanic{}) }

// Fatalf records a failure and ends the setup function.
func (m *TB) Fatalf(format string, args ...any) { m.Errorf(format, args...); panic(fatalPanic{}) }

// Failed reports whether a failure was recorded.
func (m *TB) Failed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed
}

// MarkFailed makes Failed true without a message: the tests failed, so the
// environment's cleanup prints the ends of its logs.
func (m *TB) MarkFailed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed = true
}

// Helper does nothing.
func (m *TB) Helper() {}

// Log prints to stderr.
func (m *TB) Log(args ...any) { fmt.Fprintf(os.Stderr, "%s: %s\n", m.name, fmt.Sprint(args...)) }

// Logf prints to stderr.
func (m *TB) Logf(format string, args ...any) { m.Log(fmt.Sprintf(format, args...)) }

// Name is the name given to New.
func (m *TB) Name() string { return m.name }

// Attr logs the attribute.
func (m *TB) Attr(key, value string) { m.Logf("attr %s=%s", key, value) }

// Output is stderr.
func (m *TB) Output() io.Writer { return os.Stderr }

// Context is canceled when the cleanups start.
func (m *TB) Context() context.Context { return m.ctx }

// Setenv fails: the environment is shared by every test.
func (m *TB) Setenv(string, string) { m.Fatal("Setenv is not supported in the package setup") }

// Chdir fails: the working directory is shared by every test.
func (m *TB) Chdir(string) { m.Fatal("Chdir is not supported in the package setup") }

// Skip fails: the suite never skips.
func (m *TB) Skip(args ...any) { m.Fatal(append([]any{"skipping is a failure: "}, args...)...) }

// SkipNow fails: the suite never skips.
func (m *TB) SkipNow() { m.Fatal("skipping is a failure") }

// Skipf fails: the suite never skips.
func (m *TB) Skipf(format string, args ...any) {
	m.Fatalf("skipping is a failure: "+format, args...)
}

// Skipped is always false.
func (m *TB) Skipped() bool { return false }

// ArtifactDir is a new TempDir.
func (m *TB) ArtifactDir() string { return m.TempDir() }

// TempDir returns a new directory, removed by RunCleanups.
func (m *TB) TempDir() string {
	dir, err := os.MkdirTemp("", "keymount-"+strings.ReplaceAll(m.name, " ", "-")+"-")
	if err != nil {
		m.Fatalf("TempDir: %v", err)
	}
	m.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			m.Errorf("TempDir cleanup: %v", err)
		}
	})
	return dir
}
