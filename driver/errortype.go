package driver

import (
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/targetpath"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/atomicwrite"
	"github.com/keymount/keymount/provider/providerclient"
)

// The error_type values of node_publish_error_total and
// rotation_reconcile_error_total: the upstream driver's reason strings
// (its pkg/errors), so that alerts written for it keep matching. Besides
// these, a provider's own MountResponse error code is the error_type, as
// upstream reports it, when it is the name of a gRPC code (what keymount's
// providers send) or one of these reasons; any other code a provider sends
// counts as GRPCProviderError, so that the label has a fixed set of
// values. keymount's gRPC code is the separate grpc_code label.
const (
	// errorTypeFailedToMount is upstream's default for a failed publish.
	errorTypeFailedToMount = "FailedToMount"
	// errorTypeFailedToEnsureMountPoint: the target path could not be
	// checked or used as a mount point.
	errorTypeFailedToEnsureMountPoint = "FailedToEnsureMountPoint"
	// errorTypeSecretProviderClassNotFound: the class could not be read.
	errorTypeSecretProviderClassNotFound = "SecretProviderClassNotFound"
	// errorTypeGRPCProviderError: the provider's Mount call failed, or its
	// answer broke the contract (no object versions).
	errorTypeGRPCProviderError = "GRPCProviderError"
	// errorTypeFileWriteError: the provider's files could not be written.
	errorTypeFileWriteError = "FileWriteError"
	// errorTypeFailedToRotate is upstream's default for a failed refresh.
	errorTypeFailedToRotate = "FailedToRotate"
	// errorTypeFailedToLookupProviderGRPCClient: no socket of the class's
	// provider (a refresh).
	errorTypeFailedToLookupProviderGRPCClient = "FailedToLookupProviderGRPCClient"
	// errorTypeUnexpectedTargetPath: the target path no longer shows the
	// volume the record says (a refresh).
	errorTypeUnexpectedTargetPath = "UnexpectedTargetPath"
	// errorTypeProviderNotFoundAtPublish is what upstream's publish reports
	// when the provider has no socket: an empty error_type (its provider
	// lookup returns no reason). Kept, so that a query grouping by
	// error_type groups as before; grpc_code says FailedPrecondition.
	errorTypeProviderNotFoundAtPublish = ""
)

// errClassLookup marks a failure to read the volume's SecretProviderClass
// (not found, forbidden, the API server unreachable): upstream reports
// each as SecretProviderClassNotFound.
var errClassLookup = errors.New("secretproviderclass lookup failed")

// classLookupError is an error of the class resolver, marked as such
// without changing its message.
type classLookupError struct{ err error }

func (e classLookupError) Error() string   { return e.err.Error() }
func (e classLookupError) Unwrap() []error { return []error{e.err, errClassLookup} }

// classLookupFailed marks an error of the class resolver as a failed
// lookup; a class that exists but is invalid is not one (upstream reports
// it as the path's default).
func classLookupFailed(err error) error {
	if errors.Is(err, class.ErrInvalid) {
		return err
	}
	return classLookupError{err: err}
}

// publishErrorType is the error_type of a failed NodePublishVolume, as the
// upstream driver's NodePublishVolume reports the same failure.
func publishErrorType(err error) string {
	return pathErrorTypes{
		providerLookup: errorTypeProviderNotFoundAtPublish,
		targetPath:     errorTypeFailedToEnsureMountPoint,
		other:          errorTypeFailedToMount,
	}.of(err)
}

// rotationErrorType is the error_type of a failed refresh of a mounted
// volume, as the upstream driver's rotation reconciler reports the same
// failure.
func rotationErrorType(err error) string {
	return pathErrorTypes{
		providerLookup: errorTypeFailedToLookupProviderGRPCClient,
		targetPath:     errorTypeUnexpectedTargetPath,
		other:          errorTypeFailedToRotate,
	}.of(err)
}

// pathErrorTypes are the error_types in which upstream's publish and
// rotation paths differ: for a provider without a socket (or with an
// invalid name), a target path it refuses, and any other failure.
type pathErrorTypes struct {
	providerLookup, targetPath, other string
}

// of is the error_type of err on the path: commonErrorType's, else the
// path's own.
func (p pathErrorTypes) of(err error) string {
	if t, ok := commonErrorType(err); ok {
		return t
	}
	switch {
	case isProviderLookup(err):
		return p.providerLookup
	case isTargetPathProblem(err):
		return p.targetPath
	}
	return p.other
}

// commonErrorType is the error_type both of upstream's paths give a
// failure: reading the class, the provider's call, writing its files.
func commonErrorType(err error) (string, bool) {
	var perr *providerclient.ProviderError
	switch {
	case errors.Is(err, errClassLookup), errors.Is(err, class.ErrNotFound):
		return errorTypeSecretProviderClassNotFound, true
	case errors.As(err, &perr) && perr.ErrorCode != "":
		return providerErrorType(perr.ErrorCode), true // the provider's own code, as upstream reports it
	case errors.Is(err, providerclient.ErrProviderFailed), errors.Is(err, providerclient.ErrInvalidResponse):
		return errorTypeGRPCProviderError, true
	case errors.Is(err, errTooLarge), errors.Is(err, errInvalidProviderFile), errors.Is(err, atomicwrite.ErrNoSpace),
		errors.Is(err, atomicwrite.ErrInvalidPath), errors.Is(err, atomicwrite.ErrInvalidMode), errors.Is(err, volume.ErrStagedTooLarge):
		return errorTypeFileWriteError, true
	}
	return "", false
}

// providerErrorType is the error_type of a provider's own error code: the
// code when it names a gRPC code or is one of upstream's reasons, else
// GRPCProviderError. A provider's codes are its own strings: a fixed set
// keeps a provider that puts request data in them from adding series.
func providerErrorType(code string) string {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if c.String() == code {
			return code
		}
	}
	switch code {
	case errorTypeFailedToMount, errorTypeFailedToEnsureMountPoint, errorTypeSecretProviderClassNotFound,
		errorTypeGRPCProviderError, errorTypeFileWriteError, errorTypeFailedToRotate,
		errorTypeFailedToLookupProviderGRPCClient, errorTypeUnexpectedTargetPath:
		return code
	}
	return errorTypeGRPCProviderError
}

func isProviderLookup(err error) bool {
	return errors.Is(err, providerclient.ErrProviderNotFound) || errors.Is(err, providerclient.ErrInvalidProviderName)
}

func isTargetPathProblem(err error) bool {
	return errors.Is(err, targetpath.ErrSymlink) || errors.Is(err, volume.ErrTargetInUse)
}
