package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors a Provider wraps (fmt.Errorf("...: %w", ErrNotFound)) to
// choose the gRPC code the driver sees.
var (
	// ErrNotFound: an object the volume asks for does not exist. NotFound.
	ErrNotFound = errors.New("not found")
	// ErrPermissionDenied: the provider may not read an object. PermissionDenied.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrInvalidParameters: the class parameters are wrong. InvalidArgument.
	ErrInvalidParameters = errors.New("invalid parameters")
	// ErrFailedPrecondition: the cluster or the node is not set up for the
	// mount (a CSIDriver without the token audience, a service account
	// without its role, a node without its region). FailedPrecondition.
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrUnavailable: a service the provider needs (the API server, STS, an
	// agent) could not be reached or failed; a retry may succeed.
	// Unavailable.
	ErrUnavailable = errors.New("unavailable")
)

// statusOf turns a Provider error into the gRPC status the driver sees: a
// status error keeps its code (and details), the sentinels above and context
// errors map to their codes, anything else is Internal. The result is never OK
// or Unknown.
func statusOf(err error) *status.Status {
	if st, ok := status.FromError(err); ok {
		if st.Code() != codes.OK && st.Code() != codes.Unknown {
			return st
		}
		return status.New(codes.Internal, st.Message())
	}
	return status.New(codeOf(err), err.Error())
}

// codeOf classifies an error that carries no gRPC status.
func codeOf(err error) codes.Code {
	switch {
	case errors.Is(err, ErrNotFound):
		return codes.NotFound
	case errors.Is(err, ErrPermissionDenied):
		return codes.PermissionDenied
	case errors.Is(err, ErrInvalidParameters):
		return codes.InvalidArgument
	case errors.Is(err, ErrFailedPrecondition):
		return codes.FailedPrecondition
	case errors.Is(err, ErrUnavailable):
		return codes.Unavailable
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	default:
		return codes.Internal
	}
}

// Mark returns an error with err's message that errors.Is matches against
// both err's chain and kind, one of the sentinels above: it chooses the
// gRPC code of an error without changing what it says. Mark(nil, kind) is
// nil and Mark(err, nil) is err.
func Mark(err, kind error) error {
	if err == nil || kind == nil {
		return err
	}
	return &marked{err: err, kind: kind}
}

type marked struct {
	err, kind error
}

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.err, m.kind} }

// Code is the gRPC code the driver sees when a Provider's Mount returns
// err: never OK or Unknown for a non-nil err.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	return statusOf(err).Code()
}
