package main

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/status"
)

// usageError is a command line that cannot run: keymount exits 2.
type usageError struct {
	err error
	// reported: cliflag already printed the error, in one line.
	reported bool
	// help is the command whose --help the error points to ("keymount
	// mount"); empty: none.
	help string
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// callError is a failed CSI call to the in-process driver, or a check that
// fails before the call as the driver would fail it (a class missing from
// the cluster). It prints the gRPC code and the driver's message, and keeps
// the status for status.Code.
type callError struct {
	op   string
	st   *status.Status
	hint string
}

func (e *callError) Error() string {
	return fmt.Sprintf("%s failed (%s): %s%s", e.op, e.st.Code(), e.st.Message(), e.hint)
}

// GRPCStatus returns the driver's status.
func (e *callError) GRPCStatus() *status.Status { return e.st }

// newCallError wraps the error of a CSI call made with ctx.
func newCallError(ctx context.Context, op string, err error) error {
	e := &callError{op: op, st: status.Convert(err)}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		e.hint = " (raise --timeout to wait longer)"
	}
	return e
}
