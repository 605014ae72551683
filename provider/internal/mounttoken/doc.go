// Package mounttoken proves a mount's service account token for the
// providers that act as the pod (aws, vault): it asks a [Verifier] whether
// the token proves the namespace, service account and pod the request
// names, and turns the verifier's refusals into the provider server kit's
// error kinds, each naming the service account and the fix.
package mounttoken
