package childproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// ErrExited is what Stop returns, wrapped, for a process that had exited
// before it was stopped.
var ErrExited = errors.New("had exited before it was stopped")

// ErrKilled is what Stop returns, wrapped, for a process still running a
// grace period after SIGTERM: it was killed.
var ErrKilled = errors.New("killed")

// Proc is a started child process, reaped as soon as it exits.
type Proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returned
	err    error         // cmd.Wait's answer, set before exited is closed
}

// Pid is the process's ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited and been reaped.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err waits until the process has exited and returns what exec.Cmd.Wait
// returned: nil for exit status 0, an *exec.ExitError for a failure status
// or a signal.
func (p *Proc) Err() error {
	<-p.exited
	return p.err
}

// Alive reports whether the process has not exited yet.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM and waits for a clean exit. A process still running
// after grace is killed, and that is an error wrapping ErrKilled, as is an
// exit before Stop (ErrExited) or with a failure status (the
// *exec.ExitError). Stop returns once the process is gone, unless SIGTERM
// could not be sent.
func (p *Proc) Stop(grace time.Duration) error {
	if !p.Alive() {
		return fmt.Errorf("pid %d %w: %s", p.Pid(), ErrExited, status(p.err))
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGTERM pid %d: %w", p.Pid(), err)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("pid %d exited after SIGTERM with %w", p.Pid(), p.err)
		}
		return nil
	case <-time.After(grace):
	}
	p.Kill()
	return fmt.Errorf("pid %d did not exit within %s of SIGTERM: %w", p.Pid(), grace, ErrKilled)
}

// Kill sends SIGKILL and waits until the process has exited and been reaped.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill() // fails only for a process already gone
	<-p.exited
}

// status describes what Wait returned.
func status(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
