package poll

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

const (
	// Deadline bounds Until and UntilTrue: long enough that only a stuck
	// test reaches it.
	Deadline = 2 * time.Minute

	// firstInterval is the wait before the second check; each further
	// wait doubles, up to maxInterval.
	firstInterval = 5 * time.Millisecond
	maxInterval   = 100 * time.Millisecond
)

// Until calls cond until it returns true, and fails tb, naming what, when
// cond returns an error or when Deadline passes first.
func Until(tb testing.TB, what string, cond func(ctx context.Context) (bool, error)) {
	tb.Helper()
	if err := Wait(tb.Context(), Deadline, cond); err != nil {
		tb.Fatalf("waiting for %s: %v", what, err)
	}
}

// UntilTrue is Until for a condition that needs no context and cannot
// fail.
func UntilTrue(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	Until(tb, what, func(context.Context) (bool, error) { return cond(), nil })
}

// Wait calls cond, first at once, until it returns true, and returns nil
// then. It returns cond's error as soon as cond returns one, and an error
// wrapping context.DeadlineExceeded when timeout passes first (or ctx's
// error when ctx ends). cond's context ends with the wait. Wait is for the
// waits whose normal course can outlast Deadline (a pod on a real kubelet)
// and those that word their own failure (with a log tail, say).
func Wait(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for interval := firstInterval; ; interval = min(2*interval, maxInterval) {
		if ok, err := cond(ctx); err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %v: %w", timeout, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// Check calls check, first at once, until it returns nil, and returns nil
// then: every error of check means "not yet". When timeout passes first
// (or ctx ends), it returns check's last error, saying so. It is for the
// waits whose failure is best told by what is still not so.
func Check(ctx context.Context, timeout time.Duration, check func(ctx context.Context) error) error {
	last := errors.New("never checked")
	err := Wait(ctx, timeout, func(ctx context.Context) (bool, error) {
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%w (%w)", last, err)
	}
	return nil
}
