// Package ctrltest holds the fixture builders the controller integration
// tests share: a controller-runtime manager configured for a test (no
// metrics or probe listeners, repeated controller names allowed) that runs
// until the test ends, keymount-controller's SecretSync reconciler wired
// as the binary wires it, a provider served on a real unix socket until
// the test ends, and waiting for a Secret to hold what a test expects.
package ctrltest
