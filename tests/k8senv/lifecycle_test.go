package k8senv_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/keymount/keymount/tests/k8senv"
)

// fatalRecorder is a testing.TB whose Fatal records the message and ends the
// goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatal(args ...any) { r.record(fmt.Sprint(args...)) }

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }

func (r *fatalRecorder) record(msg string) {
	r.mu.Lock()
	r.msg = msg
	r.mu.Unlock()
	runtime.Goexit()
}

func TestStartFailsWithoutAssets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		assets string
		want   string
	}{
		{name: "unset", assets: "", want: "KUBEBUILDER_ASSETS is not set"},
		{name: "empty directory", assets: t.TempDir(), want: "lacks etcd, kube-apiserver, kube-controller-manager, kube-scheduler"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(k8senv.AssetsEnv, tc.assets)
			rec := &fatalRecorder{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				k8senv.Start(rec, k8senv.Options{})
			}()
			<-done
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if !strings.Contains(rec.msg, tc.want) || !strings.Contains(rec.msg, "make k8s-env") {
				t.Errorf("Start failed with %q, want it to say %q and to run make k8s-env", rec.msg, tc.want)
			}
		})
	}
}

const holdEnv = "K8SENV_TEST_HOLD"

// TestHelperHoldsEnvironment is not a test on its own: run by
// TestProcessesDieWithTestBinary in a child test binary, it starts an
// environment, prints its processes and waits to be killed.
func TestHelperHoldsEnvironment(t *testing.T) {
	if os.Getenv(holdEnv) != "1" {
		return
	}
	k8senv.Start(t, k8senv.Options{ControllerManager: true, Scheduler: true})
	var pids []string
	for _, p := range childProcesses(t, os.Getpid()) {
		if !p.zombie {
			pids = append(pids, strconv.Itoa(p.pid))
		}
	}
	fmt.Printf("k8senv-pids: %s\n", strings.Join(pids, ","))
	time.Sleep(5 * time.Minute) // the parent kills this process long before
}

// TestProcessesDieWithTestBinary kills a test binary that holds an
// environment, as go test's -timeout or a CI job's end would, and proves
// that etcd, kube-apiserver, kube-controller-manager and kube-scheduler die
// with it.
func TestProcessesDieWithTestBinary(t *testing.T) {
	// Orphaned by the kill, the helper's children become this process's
	// children rather than init's, so the test can wait for them (and reap
	// them: no zombie is left behind).
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldsEnvironment$", "-test.count=1")
	// Killed, the helper cleans nothing up: keep its files in this test's
	// temporary directory.
	cmd.Env = append(os.Environ(), holdEnv+"=1", "TMPDIR="+t.TempDir())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	pids := make(chan []int, 1)
	go func() {
		defer close(pids)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if list, ok := strings.CutPrefix(sc.Text(), "k8senv-pids: "); ok {
				pids <- parsePIDs(list)
			}
		}
	}()
	var children []int
	select {
	case list, ok := <-pids:
		if !ok {
			t.Fatal("the helper test binary exited without starting its environment")
		}
		children = list
	case <-time.After(3 * time.Minute):
		t.Fatal("the helper test binary did not start its environment within 3m")
	}
	if len(children) != 4 {
		t.Fatalf("the helper runs %d processes (%v), want etcd, kube-apiserver, kube-controller-manager and kube-scheduler", len(children), children)
	}

	killed = true
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	ctx, cancel := context.WithTimeout(t.Context(), eventually)
	defer cancel()
	reaped := make([]<-chan error, len(children))
	for i, pid := range children {
		reaped[i] = reap(pid)
	}
	for i, pid := range children {
		reaped := reaped[i]
		var err error
		select {
		case err = <-reaped:
		case <-ctx.Done():
			select {
			case err = <-reaped:
			default:
				t.Errorf("pid %d still runs %s after its test binary was killed", pid, eventually)
				_ = unix.Kill(pid, unix.SIGKILL)
				err = <-reaped
			}
		}
		if err != nil {
			t.Errorf("waiting for pid %d: %v", pid, err)
		}
	}
}

// reap waits for the orphan pid, now a child of this process, to exit.
func reap(pid int) <-chan error {
	done := make(chan error, 1)
	go func() {
		var ws unix.WaitStatus
		for {
			_, err := unix.Wait4(pid, &ws, 0, nil)
			if !errors.Is(err, unix.EINTR) {
				done <- err
				return
			}
		}
	}()
	return done
}

func parsePIDs(list string) []int {
	var pids []int
	for _, f := range strings.Split(list, ",") {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
