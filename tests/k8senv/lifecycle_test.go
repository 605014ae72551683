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

	// Taken while the helper still holds them, pidfds name exactly these
	// processes from now on, whoever reaps them and whatever PIDs are
	// reused later.
	watched := watchChildren(t, cmd.Process.Pid, children)

	killed = true
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	ctx, cancel := context.WithTimeout(t.Context(), eventually)
	defer cancel()
	for _, w := range watched {
		if err := w.exited(ctx); err != nil {
			t.Errorf("pid %d still runs %s after its test binary was killed (%v)", w.pid, eventually, err)
			w.kill(t)
		}
		w.reap(t)
	}
	for _, p := range childProcesses(t, os.Getpid()) {
		for _, w := range watched {
			if p.pid == w.pid && p.zombie {
				t.Errorf("pid %d was left a zombie of the test process", p.pid)
			}
		}
	}
}

// watchedProc is a process followed through a pidfd.
type watchedProc struct {
	pid int
	fd  int
}

// watchChildren opens a pidfd on each pid and checks that it is still a
// child of parent, so that each pidfd names one of parent's children; the
// pidfds are closed when the test ends.
func watchChildren(t *testing.T, parent int, pids []int) []watchedProc {
	t.Helper()
	var out []watchedProc
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd_open(%d): %v", pid, err)
		}
		t.Cleanup(func() { _ = unix.Close(fd) })
		if _, ppid, ok := readProc(pid); !ok || ppid != parent {
			t.Fatalf("pid %d is no longer a child of the helper %d (parent %d, alive %v)", pid, parent, ppid, ok)
		}
		out = append(out, watchedProc{pid: pid, fd: fd})
	}
	return out
}

// exited waits until the process has exited (reaped or not) or ctx ends.
func (w watchedProc) exited(ctx context.Context) error {
	for {
		ms := -1 // no deadline: wait for as long as it takes
		if deadline, ok := ctx.Deadline(); ok {
			ms = max(int(time.Until(deadline).Milliseconds()), 0)
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}, ms)
		switch {
		case errors.Is(err, unix.EINTR):
		case err != nil:
			return fmt.Errorf("poll pidfd: %w", err)
		case n > 0:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
	}
}

// kill kills the process and waits for it to exit.
func (w watchedProc) kill(t *testing.T) {
	t.Helper()
	if err := unix.PidfdSendSignal(w.fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		t.Errorf("kill pid %d: %v", w.pid, err)
	}
	if err := w.exited(context.Background()); err != nil {
		t.Errorf("pid %d: %v", w.pid, err)
	}
}

// reap collects the exit status of the process once it has exited. The
// helper's whole thread group is gone by then, so the process is either
// this test's child (reparented to it, the subreaper) and reaped here, or
// was reaped by the helper itself while it died: a thread of the helper
// still waiting for it when the parent-death signal killed it (likely
// under load). waitid answers ECHILD in that case, which is not an error.
func (w watchedProc) reap(t *testing.T) {
	t.Helper()
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PIDFD, w.fd, &info, unix.WEXITED, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil && !errors.Is(err, unix.ECHILD):
			t.Errorf("waiting for pid %d: %v", w.pid, err)
		}
		return
	}
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
