package providerclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/provider/v1alpha1"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrInvalidProviderName means the provider name cannot name a socket: it
	// is empty or does not match ^[a-zA-Z0-9_-]{0,30}$.
	ErrInvalidProviderName = errors.New("invalid provider name")
	// ErrProviderNotFound means no configured directory holds a socket for
	// the provider. The message names the provider and every directory
	// searched.
	ErrProviderNotFound = errors.New("provider not found")
	// ErrProviderFailed means the provider call failed or the provider
	// answered with an error code. The error is a *ProviderError, or the
	// call's context ended first (the error also matches the context's).
	ErrProviderFailed = errors.New("provider failed")
	// ErrInvalidResponse means the provider answered without an error code
	// but broke the contract, for example without object_version.
	ErrInvalidResponse = errors.New("invalid provider response")
	// ErrClosed means the Client was closed.
	ErrClosed = errors.New("provider client closed")
)

// maxRecvSizeFlag is the driver flag that sets Config.MaxRecvMsgSize.
const maxRecvSizeFlag = "--provider-max-recv-size"

// ProviderError is a failed provider call or a response carrying an error
// code. It keeps the provider's code so the driver can return it to kubelet
// and label its metrics with it.
type ProviderError struct {
	// Provider is the provider name.
	Provider string
	// Code is the gRPC code of the failed call, or the code derived from
	// ErrorCode (Internal when ErrorCode names no gRPC code).
	Code codes.Code
	// ErrorCode is MountResponse.error.code, or the contract's Error that a
	// failed call carried as a status detail; empty when there was none.
	ErrorCode string
	// Message is the status message of the failed call, if any.
	Message string
}

// Error describes the failure with the provider and its code.
func (e *ProviderError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "provider %q failed", e.Provider)
	if e.ErrorCode != "" {
		fmt.Fprintf(&b, " with error code %q", e.ErrorCode)
	} else {
		fmt.Fprintf(&b, ": %s", e.Code)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Unwrap returns ErrProviderFailed.
func (e *ProviderError) Unwrap() error { return ErrProviderFailed }

// GRPCStatus returns the status the driver answers with: Code, except that
// Unknown (and a meaningless OK) become Internal.
func (e *ProviderError) GRPCStatus() *status.Status {
	return status.New(knownCode(e.Code), e.Error())
}

// knownCode replaces codes that must not reach kubelet by Internal.
func knownCode(c codes.Code) codes.Code {
	if c == codes.OK || c == codes.Unknown {
		return codes.Internal
	}
	return c
}

// codeFromName returns the gRPC code whose name is the provider's error code,
// such as "NotFound" or "PermissionDenied", and Internal for any other string.
func codeFromName(name string) codes.Code {
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		if c.String() == name {
			return knownCode(c)
		}
	}
	return codes.Internal
}

// contextError is a call ended by its context: the deadline passed or the
// caller canceled. It wraps the context's error and carries the matching
// gRPC code.
type contextError struct {
	provider string
	method   string
	err      error
}

func (e *contextError) Error() string {
	return fmt.Sprintf("provider %q: %s call: %v", e.provider, e.method, e.err)
}

// Unwrap returns the context's error and ErrProviderFailed: the provider
// call did not complete.
func (e *contextError) Unwrap() []error { return []error{e.err, ErrProviderFailed} }

func (e *contextError) GRPCStatus() *status.Status {
	return status.New(status.FromContextError(e.err).Code(), e.Error())
}

// Bounds of what a provider may make the driver repeat: its status message
// and its error code are copied into the driver's status, logs, events and
// records (and the code into metric labels).
const (
	maxMessageLen   = 4 << 10
	maxErrorCodeLen = 64
)

// bound cuts s to n bytes at a rune boundary, saying so.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const marker = "... (truncated)"
	cut := max(n-len(marker), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + marker
}

// callError turns the error of a gRPC call made with ctx into the error the
// Client returns.
func (c *Client) callError(ctx context.Context, provider, method string, err error) error {
	st := status.Convert(err)
	code := st.Code()
	if code == codes.DeadlineExceeded || code == codes.Canceled {
		if ctxErr := contextEnded(ctx); ctxErr != nil {
			return &contextError{provider: provider, method: method, err: ctxErr}
		}
	}
	pe := &ProviderError{Provider: provider, Code: knownCode(code), Message: bound(st.Message(), maxMessageLen),
		ErrorCode: bound(detailCode(st), maxErrorCodeLen)}
	if isRecvTooLarge(st) {
		pe.Message += fmt.Sprintf("; raise the driver's %s flag (now %d bytes)", maxRecvSizeFlag, c.maxRecvMsgSize)
	}
	return pe
}

// contextEnded returns why ctx ended, or nil. A deadline that has passed
// counts even before ctx's own timer fires: the provider enforces the same
// deadline, and its answer can arrive first.
func contextEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// isRecvTooLarge reports whether the client refused a response larger than
// its receive limit.
func isRecvTooLarge(st *status.Status) bool {
	msg := st.Message()
	return st.Code() == codes.ResourceExhausted &&
		strings.Contains(msg, "larger than max") && !strings.Contains(msg, "trying to send")
}

// detailCode returns the error.code a provider attached to a failed call as
// a status detail (the contract's Error message), or "".
func detailCode(st *status.Status) string {
	for _, d := range st.Details() {
		if e, ok := d.(*v1alpha1.Error); ok {
			return e.GetCode()
		}
	}
	return ""
}
