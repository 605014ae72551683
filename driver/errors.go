package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/targetpath"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/atomicwrite"
	"github.com/keymount/keymount/provider/providerclient"
)

var (
	// errInvalidRequest marks a malformed CSI request.
	errInvalidRequest = errors.New("invalid request")
	// errBusy marks a volume with another operation in flight.
	errBusy = errors.New("operation already in progress")
	// errConflict marks a request that would change what a published volume
	// is (target, class, provider, read-only).
	errConflict = errors.New("volume already published differently")
	// errTooLarge marks content that can never fit into a volume.
	errTooLarge = errors.New("volume content too large")
	// errInvalidProviderFile marks a provider file the driver refuses.
	errInvalidProviderFile = errors.New("invalid provider file")
)

// ErrAPIUnavailable marks a cluster-side failure that a later call may not
// meet: the driver is not connected to the API server yet. Errors of an API
// server that does not answer, or answers that it cannot serve now, are
// Unavailable too (see unavailable).
var ErrAPIUnavailable = errors.New("API server unavailable")

// unavailable reports whether err says the API server could not be reached
// or cannot serve now: kubelet retries such a publish.
func unavailable(err error) bool {
	var op *net.OpError
	return errors.Is(err, ErrAPIUnavailable) || errors.As(err, &op) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err)
}

// maxMessageLen bounds every error message the driver passes on: in the
// returned status, logs, events and records. A provider controls its
// messages, and an unbounded one would be copied everywhere.
const maxMessageLen = 4 << 10

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errInvalidRequest}, args...)...)
}

// truncate cuts s to maxMessageLen bytes at a rune boundary and says so.
func truncate(s string) string {
	if len(s) <= maxMessageLen {
		return s
	}
	const marker = "... (truncated)"
	cut := maxMessageLen - len(marker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + marker
}

// quoteName quotes a provider file name for a message, bounded.
func quoteName(name string) string {
	if len(name) > 256 {
		return strconv.Quote(name[:256]) + "..."
	}
	return strconv.Quote(name)
}

// fileMode converts a validated provider mode (0 to 0777).
func fileMode(m int32) os.FileMode {
	return os.FileMode(uint32(m)) //nolint:gosec // G115: checked to be 0..0777 by the caller.
}

// toStatus is the one place a Go error becomes a gRPC status. Every error a
// CSI handler returns goes through it, so none reaches kubelet as Unknown,
// and no message is longer than maxMessageLen.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		s := st.GRPCStatus()
		return status.Error(nonUnknown(s.Code()), truncate(s.Message()))
	}
	return status.Error(codeOf(err), truncate(err.Error()))
}

func codeOf(err error) codes.Code {
	var perr *providerclient.ProviderError
	switch {
	case errors.Is(err, errInvalidRequest), errors.Is(err, errInvalidProviderFile), errors.Is(err, targetpath.ErrSymlink),
		errors.Is(err, errInvalidTemplate):
		return codes.InvalidArgument
	case errors.Is(err, errBusy):
		return codes.Aborted
	case errors.Is(err, errConflict), errors.Is(err, volume.ErrTargetInUse):
		return codes.AlreadyExists
	case errors.Is(err, errTooLarge), errors.Is(err, atomicwrite.ErrNoSpace), errors.Is(err, volume.ErrStagedTooLarge):
		return codes.ResourceExhausted
	case errors.Is(err, class.ErrNotFound), errors.Is(err, class.ErrInvalid),
		errors.Is(err, providerclient.ErrInvalidProviderName), errors.Is(err, providerclient.ErrProviderNotFound):
		return codes.FailedPrecondition
	case errors.Is(err, volume.ErrNotFound):
		return codes.NotFound
	case apierrors.IsForbidden(err):
		return codes.PermissionDenied
	case errors.As(err, &perr):
		return nonUnknown(perr.Code)
	case unavailable(err):
		return codes.Unavailable
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
