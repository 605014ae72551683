package push

import (
	"errors"
	"slices"

	"github.com/aws/smithy-go"
)

// rejectedCodes are AWS's error codes for credentials it refuses.
var rejectedCodes = []string{
	"ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException",
	"AccessDenied", "AccessDeniedException", "InvalidSignatureException",
}

// awsError is a failed AWS call: its operation and AWS's error code. Its
// message never holds a value (AWS's messages are left out).
type awsError struct {
	op, code string
	err      error
}

func (e *awsError) Error() string {
	if e.code == "" {
		return e.op + " failed: " + e.err.Error()
	}
	return e.op + " failed: " + e.code
}

func (e *awsError) Unwrap() error { return e.err }

// codeOf is AWS's error code of err, "" for none.
func codeOf(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// calls remembers whether AWS refused the credentials of a call.
type calls struct{ refused bool }

// fail wraps the error of op.
func (c *calls) fail(op string, err error) error {
	code := codeOf(err)
	if slices.Contains(rejectedCodes, code) {
		c.refused = true
	}
	return &awsError{op: op, code: code, err: err}
}

func (c *calls) rejected() bool { return c.refused }
