package poll_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/keymount/keymount/tests/poll"
)

func TestUntilReturnsOnceCondHolds(t *testing.T) {
	calls := 0
	poll.Until(t, "the third call", func(context.Context) (bool, error) {
		calls++
		return calls == 3, nil
	})
	if calls != 3 {
		t.Errorf("cond called %d times, want 3", calls)
	}
}

func TestUntilTrueReturnsOnceCondHolds(t *testing.T) {
	calls := 0
	poll.UntilTrue(t, "the second call", func() bool {
		calls++
		return calls == 2
	})
	if calls != 2 {
		t.Errorf("cond called %d times, want 2", calls)
	}
}

func TestWaitReturnsCondsErrorAtOnce(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	err := poll.Wait(t.Context(), poll.Deadline, func(context.Context) (bool, error) {
		calls++
		return false, boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("Wait = %v, want %v", err, boom)
	}
	if calls != 1 {
		t.Errorf("cond called %d times after its error, want 1", calls)
	}
}

func TestWaitGivesUpAfterTimeout(t *testing.T) {
	var condCtx context.Context
	err := poll.Wait(t.Context(), 0, func(ctx context.Context) (bool, error) {
		condCtx = ctx
		return false, nil
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait = %v, want an error wrapping %v", err, context.DeadlineExceeded)
	}
	if condCtx.Err() == nil {
		t.Error("cond's context still open after Wait returned")
	}
}

func TestCheckReturnsOnNil(t *testing.T) {
	calls := 0
	err := poll.Check(t.Context(), poll.Deadline, func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("Check = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestCheckGivesUpWithLastError(t *testing.T) {
	notYet := errors.New("still pending")
	err := poll.Check(t.Context(), 0, func(context.Context) error { return notYet })
	if !errors.Is(err, notYet) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Check = %v, want an error wrapping %v and %v", err, notYet, context.DeadlineExceeded)
	}
}

func TestUntilFailsNamingWhat(t *testing.T) {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		poll.Until(tb, "the impossible", func(context.Context) (bool, error) { return false, errors.New("refused") })
	}()
	<-done
	if !strings.Contains(tb.msg, "the impossible") || !strings.Contains(tb.msg, "refused") {
		t.Errorf("failure %q does not name what was awaited and why it failed", tb.msg)
	}
}

// fatalTB records a Fatalf and ends the goroutine that called it, as
// testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
