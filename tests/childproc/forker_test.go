package childproc_test

import (
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
