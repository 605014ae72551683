package klogtest

import (
	"bytes"
	"sync"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// Buffer is a bytes.Buffer safe for a writer goroutine (klog's, or one
// copying a child process's output) and a reader at once.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Capture sends klog's output, as text, to the returned Buffer until the
// test ends; opts configure the text logger (textlogger.Verbosity, ...).
// Call klog.Flush before reading the Buffer.
func Capture(tb testing.TB, opts ...textlogger.ConfigOption) *Buffer {
	tb.Helper()
	buf := &Buffer{}
	opts = append(opts, textlogger.Output(buf))
	klog.SetLogger(textlogger.NewLogger(textlogger.NewConfig(opts...)))
	tb.Cleanup(klog.ClearLogger)
	return buf
}
