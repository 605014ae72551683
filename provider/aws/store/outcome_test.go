package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/smithy-go"
)

// TestOutcomeFixedSet: the outcome label is ok, error, a known AWS error
// code, or "other" for any code outside the known set, so whatever an
// endpoint answers adds no series.
func TestOutcomeFixedSet(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{context.Canceled, "error"},
		{fmt.Errorf("op: %w", &smithy.GenericAPIError{Code: "ThrottlingException"}), "ThrottlingException"},
		{&smithy.GenericAPIError{Code: "ResourceNotFoundException"}, "ResourceNotFoundException"},
		{&smithy.GenericAPIError{Code: "AccessDeniedException"}, "AccessDeniedException"},
		{&smithy.GenericAPIError{Code: "ExpiredToken"}, "ExpiredToken"},
		{&smithy.GenericAPIError{Code: "InternalServiceError"}, "InternalServiceError"},
		{&smithy.GenericAPIError{Code: "MadeUp0Exception"}, "other"},
		{&smithy.GenericAPIError{Code: "no-such-secret-db-7f3a"}, "other"},
		{&smithy.GenericAPIError{}, "error"},
		{errors.New("dial tcp: connection refused"), "error"},
	} {
		if got := outcome(tc.err); got != tc.want {
			t.Errorf("outcome(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
