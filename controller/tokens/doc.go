// Package tokens mints the service-account tokens keymount-controller hands
// its providers, the way kubelet does for a CSI volume.
//
// For a SecretSync, the provider must see the identity of
// spec.serviceAccountName, as a pod running as that service account would
// through a CSI volume. Kubelet gets one token per audience of the
// CSIDriver's tokenRequests by TokenRequest (create on
// serviceaccounts/token) and passes them in the volume attribute
// csi.storage.k8s.io/serviceAccount.tokens: the JSON object audience →
// TokenRequest status, {"<audience>": {"token": "…", "expirationTimestamp":
// "<RFC 3339>"}}; keymount's providers (provider/aws/spec) and third-party
// ones parse exactly that. Manager.Tokens returns that value.
//
// Like secrets-store-sync-controller v0.0.5 (its pkg/token), a Manager asks
// for one audience per request with expirationSeconds 600 by default (the
// value v0.0.5's admission policy insists on), and sends no pod binding
// (v0.0.5 builds later bind to the controller's Node: Config.BoundObjectRef
// does that). An empty audience asks for the API server's default audiences,
// as kubelet does for a tokenRequest without audience.
//
// Tokens live in memory only, one per (namespace, service account,
// audience), and are never logged, put in an error or written anywhere. A
// token is renewed when less than Config.RenewFraction (default 20 %) of its
// lifetime remains and whenever it has expired; while a renewal fails a token that has not yet
// expired is still returned, as kubelet does (unless the renewal found the
// service account gone). Concurrent callers for the same
// key share one request (singleflight), which a caller's cancellation does
// not abort for the others.
//
// The cache holds no more than the keys in use: expired entries are dropped
// (by Tokens, at most once a minute) and a TokenRequest answered NotFound
// (service account or namespace gone) evicts that service account's
// entries.
package tokens
