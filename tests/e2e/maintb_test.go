package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
)

// mainTB is the testing.TB of the package-wide setup: tests/k8senv takes a
// testing.TB and registers its cleanups on it, and the environment must
// outlive every test, so it cannot be any test's T. Cleanups run once from
// TestMain, after every test.
//
// Fatal and FailNow end the setup function (see run) instead of a
// goroutine; Skip is a failure, since this suite never skips.
type mainTB struct {
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

func newMainTB(name string) *mainTB {
	ctx, stop := context.WithCancel(context.Background())
	return &mainTB{name: name, ctx: ctx, stop: stop}
}

// run calls f, which may call Fatal, and returns the failures it reported.
func (m *mainTB) run(f func()) (err error) {
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

// cleanup cancels Context and runs the cleanups, last registered first.
func (m *mainTB) cleanup() {
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

func (m *mainTB) report(msg string) {
	m.mu.Lock()
	m.failed = true
	m.errs = append(m.errs, msg)
	m.mu.Unlock()
	fmt.Fprintf(os.Stderr, "%s: %s\n", m.name, msg)
}

func (m *mainTB) Cleanup(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cleanups = append(m.cleanups, f)
}

func (m *mainTB) Error(args ...any)                 { m.report(fmt.Sprint(args...)) }
func (m *mainTB) Errorf(format string, args ...any) { m.report(fmt.Sprintf(format, args...)) }
func (m *mainTB) Fail()                             { m.report("failed") }
func (m *mainTB) FailNow()                          { m.Fail(); panic(fatalPanic{}) }
func (m *mainTB) Fatal(args ...any)                 { m.Error(args...); panic(fatalPanic{}) }
func (m *mainTB) Fatalf(format string, args ...any) { m.Errorf(format, args...); panic(fatalPanic{}) }

func (m *mainTB) Failed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed
}

// markFailed makes Failed true without a message: the tests failed, so the
// environment's cleanup prints the ends of its logs.
func (m *mainTB) markFailed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed = true
}

func (m *mainTB) Helper() {}

func (m *mainTB) Log(args ...any) { fmt.Fprintf(os.Stderr, "%s: %s\n", m.name, fmt.Sprint(args...)) }

func (m *mainTB) Logf(format string, args ...any) { m.Log(fmt.Sprintf(format, args...)) }

func (m *mainTB) Name() string { return m.name }

func (m *mainTB) Attr(key, value string) { m.Logf("attr %s=%s", key, value) }

func (m *mainTB) Output() io.Writer { return os.Stderr }

// Context is canceled when the cleanups start.
func (m *mainTB) Context() context.Context { return m.ctx }

func (m *mainTB) Setenv(string, string) { m.Fatal("Setenv is not supported in the package setup") }

func (m *mainTB) Chdir(string) { m.Fatal("Chdir is not supported in the package setup") }

// Skip, SkipNow and Skipf fail: the suite never skips.
func (m *mainTB) Skip(args ...any) { m.Fatal(append([]any{"skipping is a failure: "}, args...)...) }

func (m *mainTB) SkipNow() { m.Fatal("skipping is a failure") }

func (m *mainTB) Skipf(format string, args ...any) {
	m.Fatalf("skipping is a failure: "+format, args...)
}

func (m *mainTB) Skipped() bool { return false }

func (m *mainTB) ArtifactDir() string { return m.TempDir() }

// TempDir returns a new directory, removed by cleanup.
func (m *mainTB) TempDir() string {
	dir, err := os.MkdirTemp("", "keymount-e2e-")
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
