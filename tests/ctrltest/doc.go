// Package ctrltest holds the fixture builders the controller integration
// tests share: a controller-runtime manager configured for a test (no
// metrics or probe listeners, repeated controller names allowed) that runs
// until the test ends, and a provider served on a real unix socket until
// the test ends.
package ctrltest
