package k8senv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// processOwner starts the control plane's processes from one goroutine locked
// to its OS thread, so they can be tied to that thread with a parent-death
// signal.
//
// Linux sends the parent-death signal when the thread that forked the child
// ends, not the process: a child forked from an ordinary goroutine would be
// killed whenever the Go runtime happened to retire that thread. This thread
// stays until stop, and since the goroutine returns still locked, the runtime
// ends the thread then, killing whatever child is still alive. When the test
// binary dies (a panic, go test's -timeout, SIGKILL) every thread ends and the
// children die with it.
type processOwner struct {
	work chan func()
	done chan struct{}
}

func newProcessOwner() *processOwner {
	o := &processOwner{work: make(chan func()), done: make(chan struct{})}
	go func() {
		// Never unlocked: see the type's comment.
		runtime.LockOSThread()
		defer close(o.done)
		for f := range o.work {
			f()
		}
	}()
	return o
}

// run runs f on the owner's thread and waits for it.
func (o *processOwner) run(f func()) {
	finished := make(chan struct{})
	o.work <- func() {
		defer close(finished)
		f()
	}
	<-finished
}

// stop ends the owner's thread once every process it started was stopped.
func (o *processOwner) stop() {
	close(o.work)
	<-o.done
}

// deathSignalWrapper writes dir/<name>, a script that runs binary with its
// arguments under a parent-death SIGKILL, for the processes envtest starts
// itself (its exec.Cmd cannot be given a SysProcAttr). exec keeps the PID,
// so envtest's signals reach the real process.
func deathSignalWrapper(dir, binary string) (string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return "", fmt.Errorf("setpriv (Debian package util-linux) is needed to tie the control plane to the test process: %w", err)
	}
	script := fmt.Sprintf("#!/bin/sh\n# Written by k8senv: %s dies with the test process.\nexec %s --pdeathsig KILL -- %s \"$@\"\n",
		filepath.Base(binary), shellQuote(setpriv), shellQuote(binary))
	path := filepath.Join(dir, filepath.Base(binary))
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil { //nolint:gosec // G306: an executable script, readable by its owner only
		return "", err
	}
	return path, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
