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
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	default:
		return codes.Internal
	}
}
