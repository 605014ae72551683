package k8senv_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/keymount/keymount/tests/k8senv"
)

// sharedDirs are the directories of the control planes TestShared started:
// TestMain checks that Run removed them.
var sharedDirs []string

// TestMain runs the tests through k8senv.Run, then checks that it left
// nothing behind: no process of a shared control plane still runs, and
// their directories are gone.
func TestMain(m *testing.M) {
	code := k8senv.Run(m)
	if os.Getenv(holdEnv) != "" {
		os.Exit(code)
	}
	if err := checkNothingLeft(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: after k8senv.Run: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

func checkNothingLeft() error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ppid, ok := readProc(pid); ok && ppid == os.Getpid() && !p.zombie {
			return fmt.Errorf("%s (pid %d) still runs", p.binary, pid)
		}
	}
	for _, dir := range sharedDirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			return fmt.Errorf("%s is still there (stat: %w)", dir, err)
		}
	}
	return nil
}

// TestShared: tests asking for the same options get one control plane,
// started once and still serving after the test that started it ended;
// other options get another; a directory of the caller's is refused.
func TestShared(t *testing.T) {
	crds := k8senv.Options{CRDDirectoryPaths: []string{"../../deploy/crds"}}
	var first *k8senv.Env
	t.Run("starts", func(t *testing.T) {
		first = k8senv.Shared(t, crds)
		sharedDirs = append(sharedDirs, first.Envtest.ControlPlane.APIServer.CertDir)
	})
	if first == nil {
		t.Fatal("the shared control plane did not start")
	}
	t.Run("same options, same control plane, still serving", func(t *testing.T) {
		again := k8senv.Shared(t, k8senv.Options{CRDDirectoryPaths: []string{"../k8senv/../../deploy/crds"}})
		if again != first {
			t.Fatalf("Shared with the same options returned another control plane (%s, first %s)", again.Config.Host, first.Config.Host)
		}
		if err := serves(t.Context(), again); err != nil {
			t.Fatalf("the shared control plane does not serve after the test that started it ended: %v", err)
		}
	})
	t.Run("other options, another control plane", func(t *testing.T) {
		other := k8senv.Shared(t, k8senv.Options{})
		sharedDirs = append(sharedDirs, other.Envtest.ControlPlane.APIServer.CertDir)
		if other == first || other.Config.Host == first.Config.Host {
			t.Fatalf("Shared with other options returned the first control plane (%s)", first.Config.Host)
		}
		if err := serves(t.Context(), other); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a directory of the caller's is refused", func(t *testing.T) {
		rec := &fatalRecorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			k8senv.Shared(rec, k8senv.Options{Dir: t.TempDir()})
		}()
		<-done
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.msg == "" {
			t.Fatal("Shared accepted Options.Dir")
		}
	})
}

func serves(ctx context.Context, env *k8senv.Env) error {
	_, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	return err
}
