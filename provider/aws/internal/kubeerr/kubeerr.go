// Package kubeerr chooses the gRPC code of a failed API server request made
// by the AWS provider on behalf of a mount.
package kubeerr

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/keymount/keymount/provider/server"
)

// Classify marks err (from a client-go request) with the code kubelet
// should see: a refusal or a missing object (the provider's RBAC, a deleted
// pod) is FailedPrecondition, which a retry will not fix by itself;
// anything else (the API server unreachable, overloaded or failing) is
// Unavailable. Context errors keep their own code. The message is
// unchanged.
func Classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsNotFound(err),
		apierrors.IsBadRequest(err), apierrors.IsInvalid(err), apierrors.IsMethodNotSupported(err):
		return server.Mark(err, server.ErrFailedPrecondition)
	default:
		return server.Mark(err, server.ErrUnavailable)
	}
}
