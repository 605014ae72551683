package k8senv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/keymount/keymount/tests/childproc"
)

// processOwner starts the control plane's processes from one OS thread (a
// childproc.Forker), so they can be tied to that thread with a parent-death
// signal: they die with the test binary, or at stop, whichever comes first.
type processOwner struct {
	forker *childproc.Forker
}

func newProcessOwner() *processOwner {
	return &processOwner{forker: childproc.NewForker()}
}

// run runs f on the owner's thread and waits for it.
func (o *processOwner) run(f func()) { o.forker.Do(f) }

// stop ends the owner's thread once every process it started was stopped;
// Linux kills any that is still alive.
func (o *processOwner) stop() { o.forker.Close() }

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
