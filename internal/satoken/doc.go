// Package satoken proves the identity a Kubernetes service account token
// names, for providers that serve a caller only what its token proves (a
// provider's socket is reachable by every process that shares its host
// directory, so nothing in a mount request is believed without a proof).
//
// A [Verifier] checks a token against what the request says:
//
//   - the signature, with the cluster's service account issuer keys from the
//     API server's OIDC discovery (/.well-known/openid-configuration for the
//     issuer, /openid/v1/jwks for the keys), fetched once and cached,
//     refetched when a token names an unknown key ID (at most once per
//     Config.MinRefetchInterval, so garbage key IDs cannot pump the API
//     server) and when the keys are older than Config.KeysMaxAge; only
//     asymmetric algorithms are accepted (never "none", never HMAC);
//   - the issuer (discovery's), the audience, exp, nbf and iat (within
//     Config.Leeway of the clock), the subject
//     system:serviceaccount:<namespace>:<name> of the request and, for a
//     token bound to a pod (its kubernetes.io claim), the request's pod name
//     and UID.
//
// Where discovery cannot be read (disabled, forbidden, unreachable), a
// TokenReview proves the token instead, after the same checks of its
// claims; its answer is cached per token hash until the token expires
// (refusals for a short while), and discovery is tried again after
// Config.DiscoveryRetry.
//
// Once the keys are cached, a proof makes no API request. Errors match
// [ErrNoToken] (no token: a bad request), [ErrDenied] (the token proves
// nothing, or not what the request names) or [ErrUnavailable] (neither the
// keys nor a TokenReview could be had; a retry may succeed). No error and no
// log ever contains the token.
package satoken
