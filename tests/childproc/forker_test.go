package childproc_test

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/keymount/keymount/tests/childproc"
)

func TestForkerDoRunsOnOneThread(t *testing.T) {
	t.Parallel()
	f := childproc.NewForker()
	defer f.Close()
	var first, second int
	f.Do(func() { first = syscall.Gettid() })
	f.Do(func() { second = syscall.Gettid() })
	if first != second {
		t.Errorf("Do ran on thread %d, then on %d: want one thread", first, second)
	}
}

// TestForkerCloseKillsChildren checks the parent-death signal itself: the
// children of a Forker die when its thread ends, as the children of Start die
// when the test binary does.
func TestForkerCloseKillsChildren(t *testing.T) {
	t.Parallel()
	f := childproc.NewForker()
	p, err := f.Start(exec.Command("sleep", "60"))
	if err != nil {
		f.Close()
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(p.Kill)
	if !p.Alive() {
		t.Fatalf("sleep exited at once: %v", p.Err())
	}
	f.Close()
	waitExited(t, p)
	if got := signalOf(p.Err()); got != syscall.SIGKILL {
		t.Errorf("ended by signal %d (%v), want SIGKILL: its parent-death signal", got, p.Err())
	}
}
