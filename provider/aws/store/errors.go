package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/provider/server"
)

// ErrThrottled means the store kept throttling the provider after retries. It maps
// to ResourceExhausted (see [FetchError.GRPCStatus]).
var ErrThrottled = errors.New("throttled")

// ErrUnavailable means the store answered 5xx or could not be reached after
// retries. It maps to Unavailable.
var ErrUnavailable = errors.New("unavailable")

// Kind classifies why one object could not be fetched.
type Kind string

// Kinds of object failures, most permanent first.
const (
	KindInvalid     Kind = "invalid"
	KindDenied      Kind = "access denied"
	KindNotFound    Kind = "not found"
	KindTimeout     Kind = "timeout"
	KindCanceled    Kind = "canceled"
	KindThrottled   Kind = "throttled"
	KindUnavailable Kind = "unavailable"
	KindInternal    Kind = "internal"
)

// kindOrder is the precedence of kinds when one code must describe all
// failures: a permanent failure wins over a transient one, so kubelet does not
// retry a mount that cannot succeed as if it were still in progress.
var kindOrder = []Kind{KindInvalid, KindDenied, KindNotFound, KindTimeout, KindCanceled, KindThrottled, KindUnavailable, KindInternal}

// sentinel is the error a kind wraps for errors.Is.
func (k Kind) sentinel() error {
	switch k {
	case KindInvalid:
		return server.ErrInvalidParameters
	case KindDenied:
		return server.ErrPermissionDenied
	case KindNotFound:
		return server.ErrNotFound
	case KindTimeout:
		return context.DeadlineExceeded
	case KindCanceled:
		return context.Canceled
	case KindThrottled:
		return ErrThrottled
	case KindUnavailable:
		return ErrUnavailable
	default:
		return nil
	}
}

func (k Kind) code() codes.Code {
	switch k {
	case KindInvalid:
		return codes.InvalidArgument
	case KindDenied:
		return codes.PermissionDenied
	case KindNotFound:
		return codes.NotFound
	case KindTimeout:
		return codes.DeadlineExceeded
	case KindCanceled:
		return codes.Canceled
	case KindThrottled:
		return codes.ResourceExhausted
	case KindUnavailable:
		return codes.Unavailable
	default:
		return codes.Internal
	}
}

// ObjectError is why one object (one file) could not be fetched. Reason is
// short and never holds a secret value.
type ObjectError struct {
	FileName string
	// Type, Object and Region name what was asked for last: the object's
	// type, its name or ARN as the class writes it (its failoverObject's in
	// the failover region), and the region asked.
	Type   string
	Object string
	Region string
	// Find, for a find object, names what it matches (`path "prod/" name
	// "^db" tag "team=a"`); Object is "" then.
	Find    string
	Version string // the version id or number asked for, if any
	Label   string // the staging label or SSM label asked for, if any
	Kind    Kind
	Reason  string
	// Code is the AWS error code of the failure, "" when there was none
	// (a timeout, an unreachable store, a bad JMESPath).
	Code string
}

// FetchError aggregates the per-object failures of one Fetch, one line per
// object. errors.Is matches the sentinel of every kind present
// (server.ErrNotFound, server.ErrPermissionDenied, ErrThrottled, ...); the
// gRPC code is that of the most permanent kind.
type FetchError struct {
	Objects []ObjectError
}

func (e *FetchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d object(s) could not be fetched:", len(e.Objects))
	for _, o := range e.Objects {
		fmt.Fprintf(&b, "\n%s: %s: %s", o.FileName, o.Kind, o.Reason)
		if o.Object != "" || o.Find != "" {
			fmt.Fprintf(&b, " (%s)", o.describe())
		}
	}
	return b.String()
}

// describe names the AWS object: `secretsmanager "app/db" label "blue" in
// region eu-west-1`.
func (o *ObjectError) describe() string {
	var b strings.Builder
	if o.Find != "" {
		fmt.Fprintf(&b, "%s find %s in region %s", o.Type, o.Find, o.Region)
		return b.String()
	}
	fmt.Fprintf(&b, "%s %q", o.Type, o.Object)
	if o.Version != "" {
		fmt.Fprintf(&b, " version %q", o.Version)
	}
	if o.Label != "" {
		fmt.Fprintf(&b, " label %q", o.Label)
	}
	fmt.Fprintf(&b, " in region %s", o.Region)
	return b.String()
}

// Unwrap returns the sentinel of every kind present.
func (e *FetchError) Unwrap() []error {
	var errs []error
	for _, k := range e.kinds() {
		if s := k.sentinel(); s != nil {
			errs = append(errs, s)
		}
	}
	return errs
}

// Kind is the most permanent kind among the failures.
func (e *FetchError) Kind() Kind {
	kinds := e.kinds()
	if len(kinds) == 0 {
		return KindInternal
	}
	return kinds[0]
}

// GRPCStatus lets the provider server kit keep the code: ResourceExhausted
// for throttling, Unavailable for 5xx, and so on.
func (e *FetchError) GRPCStatus() *status.Status {
	return status.New(e.Kind().code(), e.Error())
}

// kinds lists the distinct kinds present, in precedence order.
func (e *FetchError) kinds() []Kind {
	var out []Kind
	for _, k := range kindOrder {
		if slices.ContainsFunc(e.Objects, func(o ObjectError) bool { return o.Kind == k }) {
			out = append(out, k)
		}
	}
	return out
}

// objectFailure is the error one fetch step records for its objects.
type objectFailure struct {
	kind   Kind
	reason string
	code   string // the AWS error code, if any
}

func (f *objectFailure) Error() string { return string(f.kind) + ": " + f.reason }

func failure(kind Kind, format string, args ...any) *objectFailure {
	return &objectFailure{kind: kind, reason: fmt.Sprintf(format, args...)}
}

// AWS error codes by kind.
var (
	notFoundCodes = []string{"ResourceNotFoundException", "ParameterNotFound", "ParameterVersionNotFound", "InvalidParameters"}
	deniedCodes   = []string{"AccessDeniedException", "AccessDenied", "UnrecognizedClientException", "InvalidClientTokenId", "InvalidSignatureException", "ExpiredTokenException", "ExpiredToken", "DecryptionFailure", "KMSAccessDeniedException"}
)

// classify turns an SDK error into a failure. The reason names the AWS error
// code only: AWS messages may echo request data, never values, but keep them
// out anyway.
func classify(ctx context.Context, err error) *objectFailure {
	var f *objectFailure
	if errors.As(err, &f) {
		return f
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return failure(KindTimeout, "deadline exceeded")
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return failure(KindCanceled, "canceled")
	}
	// Credentials asked for on first use (the failover region's) may fail
	// inside the call; their error says what its code is.
	switch {
	case errors.Is(err, server.ErrPermissionDenied):
		return failure(KindDenied, "credentials refused")
	case errors.Is(err, server.ErrUnavailable):
		return failure(KindUnavailable, "credentials unavailable")
	case errors.Is(err, server.ErrFailedPrecondition):
		return failure(KindInvalid, "credentials not obtainable")
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		if f := codeFailure(apiErr.ErrorCode()); f.kind != KindInternal {
			if f.kind == KindThrottled {
				f.reason += " after retries"
			}
			return f
		}
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) && respErr.HTTPStatusCode() >= 500 {
		return failure(KindUnavailable, "HTTP %d after retries", respErr.HTTPStatusCode())
	}
	if apiErr != nil {
		return failure(KindInternal, "%s", apiErr.ErrorCode())
	}
	var netErr net.Error
	var sendErr *smithyhttp.RequestSendError
	if errors.As(err, &netErr) || errors.As(err, &sendErr) {
		return failure(KindUnavailable, "store unreachable")
	}
	return failure(KindInternal, "unexpected error")
}

// codeFailure classifies an AWS error code, from an error answer or from
// the per-secret errors of BatchGetSecretValue.
func codeFailure(code string) *objectFailure {
	var f *objectFailure
	switch {
	case slices.Contains(notFoundCodes, code):
		f = failure(KindNotFound, "%s", code)
	case slices.Contains(deniedCodes, code):
		f = failure(KindDenied, "%s", code)
	case isThrottleCode(code):
		f = failure(KindThrottled, "%s", code)
	default:
		f = failure(KindInternal, "%s", code)
	}
	f.code = code
	return f
}

// rejectedCredentialsCodes are the AWS error codes of a call refused for
// its credentials: expired, unknown, or no longer allowed (a changed trust
// policy or session tags). New credentials may succeed where these fail.
var rejectedCredentialsCodes = []string{
	"ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException",
	"AccessDenied", "AccessDeniedException",
}

// CredentialsRejected reports whether an object failed because the store
// refused the request's credentials (ExpiredToken, InvalidClientTokenId,
// AccessDenied and their JSON-protocol names): the caller should drop
// them from any cache and get new ones for the next attempt.
func (e *FetchError) CredentialsRejected() bool {
	return slices.ContainsFunc(e.Objects, func(o ObjectError) bool {
		return slices.Contains(rejectedCredentialsCodes, o.Code)
	})
}

// isThrottleCode uses the SDK's own list of throttling codes.
func isThrottleCode(code string) bool {
	_, ok := retry.DefaultThrottleErrorCodes[code]
	return ok
}

// failoverWorthy reports whether a batch failure may succeed in another
// region: the store was unavailable, throttling or too slow.
func failoverWorthy(f *objectFailure) bool {
	return f.kind == KindThrottled || f.kind == KindUnavailable || f.kind == KindTimeout
}
