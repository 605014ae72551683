// Package klogtest captures klog's output in tests: [Capture] sends it to
// a [Buffer] until the test ends, for asserting what was (and was not)
// logged.
package klogtest
