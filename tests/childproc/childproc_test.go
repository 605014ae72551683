package childproc_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/keymount/keymount/tests/childproc"
)

// waitLimit bounds every wait for a child to start or exit.
const waitLimit = 10 * time.Second

// Children that answer SIGTERM as a driver might. Each prints "ready" once
// its SIGTERM disposition is set.
const (
	// exitsOnTerm exits with status 0 on SIGTERM.
	exitsOnTerm = `trap 'exit 0' TERM; echo ready; while :; do sleep 0.05; done`
	// ignoresTerm ignores SIGTERM: only SIGKILL ends it.
	ignoresTerm = `trap '' TERM; echo ready; exec sleep 60`
)

func TestStartReaps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		binary   string
		wantCode int // 0: Err is nil
	}{
		{name: "exit status 0", binary: "true"},
		{name: "exit status 1", binary: "false", wantCode: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, exec.Command(tc.binary))
			waitExited(t, p)
			if p.Alive() {
				t.Error("Alive after Exited was closed")
			}
			err := p.Err()
			if tc.wantCode == 0 {
				if err != nil {
					t.Errorf("Err = %v, want nil", err)
				}
				return
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.wantCode {
				t.Errorf("Err = %v, want exit status %d", err, tc.wantCode)
			}
		})
	}
}

func TestStartMissingBinary(t *testing.T) {
	t.Parallel()
	p, err := childproc.Start(exec.Command("/nonexistent/keymount-childproc-test"))
	if err == nil {
		p.Kill()
		t.Fatal("Start of a missing binary succeeded")
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Start = %v, want an error wrapping os.ErrNotExist", err)
	}
}

func TestStartKeepsSysProcAttr(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := start(t, cmd)
	pgid, err := syscall.Getpgid(p.Pid())
	if err != nil {
		t.Fatalf("Getpgid(%d): %v", p.Pid(), err)
	}
	if pgid != p.Pid() {
		t.Errorf("process group %d, want its own (%d): Setpgid was lost", pgid, p.Pid())
	}
	if got := cmd.SysProcAttr.Pdeathsig; got != syscall.SIGKILL {
		t.Errorf("Pdeathsig = %v, want SIGKILL", got)
	}
}

func TestStop(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	for _, tc := range []struct {
		name       string
		script     string         // a ready-printing sh script; empty: sleep 60
		wantErr    error          // wrapped by Stop's error; nil with wantSignal 0: Stop succeeds
		wantSignal syscall.Signal // the signal that ended the process, 0 for an exit
	}{
		{name: "exits cleanly on SIGTERM", script: exitsOnTerm},
		{name: "dies of SIGTERM", wantSignal: syscall.SIGTERM},
		{name: "ignores SIGTERM: killed after the grace", script: ignoresTerm, wantErr: childproc.ErrKilled, wantSignal: syscall.SIGKILL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var p *childproc.Proc
			if tc.script == "" {
				p = start(t, exec.Command("sleep", "60"))
			} else {
				p = startReady(t, tc.script)
			}
			begin := time.Now()
			err := p.Stop(grace)
			elapsed := time.Since(begin)
			if p.Alive() {
				t.Fatal("Alive after Stop returned")
			}
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("Stop = %v, want %v", err, tc.wantErr)
				}
			case tc.wantSignal != 0:
				if !errors.Is(err, p.Err()) {
					t.Errorf("Stop = %v, want it to wrap Wait's answer %v", err, p.Err())
				}
			case err != nil:
				t.Errorf("Stop = %v, want nil", err)
			}
			if got := signalOf(p.Err()); got != tc.wantSignal {
				t.Errorf("ended by signal %d (%v), want %d", got, p.Err(), tc.wantSignal)
			}
			if errors.Is(tc.wantErr, childproc.ErrKilled) && elapsed < grace {
				t.Errorf("killed after %s, before the %s grace", elapsed, grace)
			}
		})
	}
}

func TestStopExited(t *testing.T) {
	t.Parallel()
	p := start(t, exec.Command("true"))
	waitExited(t, p)
	if err := p.Stop(time.Second); !errors.Is(err, childproc.ErrExited) {
		t.Errorf("Stop = %v, want %v", err, childproc.ErrExited)
	}
}

func TestKill(t *testing.T) {
	t.Parallel()
	p := startReady(t, ignoresTerm)
	p.Kill()
	if p.Alive() {
		t.Fatal("Alive after Kill returned")
	}
	if got := signalOf(p.Err()); got != syscall.SIGKILL {
		t.Errorf("ended by signal %d (%v), want SIGKILL", got, p.Err())
	}
}

// start starts cmd through childproc.Start; the test's cleanup kills it.
func start(t *testing.T, cmd *exec.Cmd) *childproc.Proc {
	t.Helper()
	p, err := childproc.Start(cmd)
	if err != nil {
		t.Fatalf("Start %s: %v", cmd, err)
	}
	t.Cleanup(p.Kill)
	return p
}

// startReady starts sh -c script and waits until it prints "ready".
func startReady(t *testing.T, script string) *childproc.Proc {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	cmd := exec.Command("sh", "-c", script)
	cmd.Stdout = w
	p, err := childproc.Start(cmd)
	_ = w.Close() // the child holds its own copy
	if err != nil {
		t.Fatalf("Start %s: %v", cmd, err)
	}
	t.Cleanup(p.Kill)
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if line != "ready\n" {
			t.Fatalf("child printed %q, want ready (it ended with %v)", line, p.Err())
		}
	case <-time.After(waitLimit):
		t.Fatalf("child not ready within %s", waitLimit)
	}
	return p
}

// waitExited waits until p has exited.
func waitExited(t *testing.T, p *childproc.Proc) {
	t.Helper()
	select {
	case <-p.Exited():
	case <-time.After(waitLimit):
		t.Fatalf("pid %d did not exit within %s", p.Pid(), waitLimit)
	}
}

// signalOf is the signal that ended a process whose Wait returned err, 0
// when it exited.
func signalOf(err error) syscall.Signal {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0
	}
	return ws.Signal()
}
