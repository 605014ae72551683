// Package vaultkv writes Kubernetes Secrets' values into Vault KV secrets
// (version 1 and 2) under one rule: a value keymount did not write is never
// replaced unless the caller says so. A KV version 2 write is a
// check-and-set against the version keymount last wrote (or found); a value
// identical to what keymount would write is adopted without a write;
// nothing is written when nothing changed. keymount-controller's
// SecretMirrors with a Vault destination use KV.Put (mirrors' format: every
// value base64); the Vault provider's pushes use KV.PutFields and
// KV.RemoveFields (the External Secrets Operator's format: a JSON object's
// members, or one field set to a string, the others kept).
//
// It holds no client of its own: callers pass a Vault client carrying the
// token of the identity that writes.
package vaultkv
