// Package datafrom turns one secret value into many keys, and names found by
// a store search into keys, the way External Secrets Operator's
// spec.dataFrom does: extract (every field of a JSON object its own key),
// the key rewrites (regexp), the key conversion strategies (Default,
// Unicode) and the value decoding strategies (None, Base64, Base64URL,
// Auto). Providers use it for their keymount extensions (the AWS provider's
// `extract` and `find` objects); the rules are ESO's documented ones, so a
// converted ExternalSecret gives the same Secret.
//
// Errors name keys and options, never values.
package datafrom
