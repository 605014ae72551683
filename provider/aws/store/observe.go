package store

import (
	"context"
	"errors"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// Observer hears the store's requests and cache lookups, for metrics. Its
// methods must be cheap and safe for concurrent use.
type Observer interface {
	// StoreCall is one API operation, with its retries ("secretsmanager",
	// "BatchGetSecretValue"); outcome is "ok", the AWS error code when it
	// is one of outcomeCodes ("ResourceNotFoundException",
	// "ThrottlingException", …), "other" for any other code, or "error"
	// when there is none (unreachable, cancelled): a fixed set, whatever
	// the endpoint answers.
	StoreCall(service, operation, outcome string, took time.Duration)
	// CacheLookup is one lookup in the node-local cache.
	CacheLookup(hit bool)
}

// observe is the SDK middleware that reports each operation, retries
// included, to the observer.
func (s *Store) observe(stack *middleware.Stack) error {
	if s.cfg.Observer == nil {
		return nil
	}
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("keymountObserve",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			start := time.Now()
			out, md, err := next.HandleInitialize(ctx, in)
			s.cfg.Observer.StoreCall(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), outcome(err), time.Since(start))
			return out, md, err
		}), middleware.Before)
}

// outcomeCodes are the AWS error codes the outcome label names; any other
// code is "other". The codes the store classifies (not found, denied,
// rejected credentials, throttled) and the common request and service
// failures of Secrets Manager and SSM.
var outcomeCodes = func() map[string]bool {
	m := map[string]bool{}
	for _, list := range [][]string{notFoundCodes, deniedCodes, rejectedCredentialsCodes, {
		"InvalidRequestException", "InvalidParameterException", "ValidationException", "InternalServiceError",
		"InternalServerError", "InternalFailure", "ServiceUnavailable", "ServiceUnavailableException",
		"RequestTimeout", "RequestTimeoutException", "IncompleteSignature", "MissingAuthenticationToken",
		"OptInRequired", "InvalidKeyId", "ParameterVersionLabelLimitExceeded", "InvalidNextToken",
	}} {
		for _, c := range list {
			m[c] = true
		}
	}
	for c := range retry.DefaultThrottleErrorCodes {
		m[c] = true
	}
	return m
}()

// outcome is the outcome label of a finished operation.
func outcome(err error) string {
	var apiErr smithy.APIError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &apiErr) && outcomeCodes[apiErr.ErrorCode()]:
		return apiErr.ErrorCode()
	case apiErr != nil && apiErr.ErrorCode() != "":
		return "other"
	default:
		return "error"
	}
}

// cached looks identity's item up in the cache and reports the lookup.
func (s *Store) cached(identity string, it item) (value, bool) {
	v, ok := s.cache.get(identity, it)
	if s.cfg.Observer != nil {
		s.cfg.Observer.CacheLookup(ok)
	}
	return v, ok
}
