// Package push writes Kubernetes Secrets' data into secret stores: the
// one place keymount-controller writes to a store (a SecretMirror with a
// Vault destination). Every write keeps one rule: a value keymount did not
// write is never replaced unless the manifest says so. A KV version 2
// write is a check-and-set against the version keymount last wrote (or
// found); a value identical to what keymount would write is adopted
// without a write; nothing is written when nothing changed.
//
// It holds no client of its own: callers pass a Vault client carrying the
// token of the identity the manifest names, so one login cache serves every
// caller.
package push
