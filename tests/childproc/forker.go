package childproc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// A Forker runs functions, cmd.Start above all, on one goroutine locked to
// its OS thread, so that the parent-death signal of the children it forks
// fires only when that thread ends: at Close, or when the test binary dies.
type Forker struct {
	work chan func()
	done chan struct{}
}

// NewForker starts a Forker's thread. Close ends it.
func NewForker() *Forker {
	f := &Forker{work: make(chan func()), done: make(chan struct{})}
	go f.loop()
	return f
}

func (f *Forker) loop() {
	// Never unlocked: the goroutine returns still locked, so the runtime
	// ends the thread, and Linux signals the children it forked.
	runtime.LockOSThread()
	defer close(f.done)
	for fn := range f.work {
		fn()
	}
}

// Do runs fn on the Forker's thread and waits for it. It must not be called
// after Close.
func (f *Forker) Do(fn func()) {
	finished := make(chan struct{})
	f.work <- func() {
		defer close(finished)
		fn()
	}
	<-finished
}

// Close ends the Forker's goroutine. Its children get their parent-death
// SIGKILL once the thread itself ends, which the Go runtime does not promise
// at once (a goroutine locked to the main thread leaves it running): kill
// children explicitly; the parent-death signal is for a test binary that
// dies.
func (f *Forker) Close() {
	close(f.work)
	<-f.done
}

// Start starts cmd from the Forker's thread with a parent-death SIGKILL,
// keeping whatever else cmd.SysProcAttr asks for (a process group, say), and
// reaps it when it exits.
func (f *Forker) Start(cmd *exec.Cmd) (*Proc, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	var err error
	f.Do(func() { err = cmd.Start() })
	if err != nil {
		return nil, err
	}
	p := &Proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// binaryForker lives as long as the test binary: it is never closed.
var binaryForker = sync.OnceValue(NewForker)

// Start starts cmd as Forker.Start does, from a thread that lives as long as
// the test binary: the child dies with the test binary and never earlier.
func Start(cmd *exec.Cmd) (*Proc, error) {
	return binaryForker().Start(cmd)
}
