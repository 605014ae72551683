package driver

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/keymount/keymount/driver/atomicwrite"
	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/providerclient"
	"github.com/keymount/keymount/driver/volume"
)

var (
	// errInvalidRequest marks a malformed CSI request.
	errInvalidRequest = errors.New("invalid request")
	// errBusy marks a volume with another operation in flight.
	errBusy = errors.New("operation already in progress")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errInvalidRequest}, args...)...)
}

// toStatus is the one place a Go error becomes a gRPC status. Every error a
// CSI handler returns goes through it, so none reaches kubelet as Unknown.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		s := st.GRPCStatus()
		return status.Error(nonUnknown(s.Code()), s.Message())
	}
	return status.Error(codeOf(err), err.Error())
}

func codeOf(err error) codes.Code {
	var perr *providerclient.ProviderError
	switch {
	case errors.Is(err, errInvalidRequest):
		return codes.InvalidArgument
	case errors.Is(err, errBusy):
		return codes.Aborted
	case errors.Is(err, class.ErrNotFound), errors.Is(err, class.ErrInvalid),
		errors.Is(err, providerclient.ErrInvalidProviderName), errors.Is(err, providerclient.ErrProviderNotFound):
		return codes.FailedPrecondition
	case errors.Is(err, volume.ErrNotFound):
		return codes.NotFound
	case apierrors.IsForbidden(err):
		return codes.PermissionDenied
	case errors.As(err, &perr):
		return nonUnknown(perr.Code)
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, atomicwrite.ErrInvalidPath), errors.Is(err, providerclient.ErrInvalidResponse):
		return codes.Internal
	}
	if st, ok := status.FromError(err); ok {
		return nonUnknown(st.Code())
	}
	return codes.Internal
}

func nonUnknown(c codes.Code) codes.Code {
	if c == codes.Unknown || c == codes.OK {
		return codes.Internal
	}
	return c
}
