package identity

import (
	"errors"
	"net/http"
	"slices"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/keymount/keymount/provider/server"
)

// Every error of a Resolver chooses the gRPC code kubelet sees through the
// provider kit's sentinels (see provider/server): a volume context or
// cluster not set up for the identity (no token for the audience, no role
// annotation) is FailedPrecondition, STS or the agent refusing the identity
// is PermissionDenied, STS or the agent unreachable or failing is
// Unavailable, and context errors keep their codes. None is Internal.

// sentinel is an error of this package that also matches the kit's
// sentinel of its code.
type sentinel struct {
	msg  string
	kind error
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.kind }

// stsDenials are the STS error codes of an identity STS refuses: the role's
// trust policy, the token, or the OIDC provider's claims.
var stsDenials = []string{
	"AccessDenied", "AccessDeniedException", "InvalidIdentityToken", "IDPRejectedClaim",
	"ExpiredTokenException", "ExpiredToken", "InvalidClientTokenId",
}

// stsTransient are the STS error codes a retry may fix.
var stsTransient = []string{"IDPCommunicationError", "ServiceUnavailable", "InternalFailure"}

// stsKind is the kit sentinel of an STS failure.
func stsKind(err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code := apiErr.ErrorCode()
		switch {
		case slices.Contains(stsDenials, code):
			return server.ErrPermissionDenied
		case slices.Contains(stsTransient, code), isThrottle(code):
			return server.ErrUnavailable
		}
		var respErr *awshttp.ResponseError
		if errors.As(err, &respErr) && respErr.HTTPStatusCode() < http.StatusInternalServerError {
			// A request STS refuses for another reason (a malformed role
			// ARN in the annotation, a region where STS is disabled) is
			// fixed in the cluster's setup, not by retrying.
			return server.ErrFailedPrecondition
		}
		return server.ErrUnavailable
	}
	// Not an answer: STS unreachable, or too slow for the exchange's own
	// deadline (it runs for every waiting mount, on a context of its own).
	return server.ErrUnavailable
}

// isThrottle reports STS throttling (after the SDK's retries).
func isThrottle(code string) bool {
	return code == "Throttling" || code == "ThrottlingException" || code == "RequestLimitExceeded" || code == "TooManyRequestsException"
}
