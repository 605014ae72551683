package hostile_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// capturedLogs receives everything klog logs in this process (the
// in-process driver's log) while a test runs. Tests of this package do not
// run in parallel, so what it holds comes from the capturing test.
type capturedLogs struct {
	mu      sync.Mutex
	entries []string
}

// captureLogs routes klog to a capture until the test ends.
func captureLogs(t *testing.T) *capturedLogs {
	t.Helper()
	c := &capturedLogs{}
	klog.SetLogger(logr.New(&captureSink{c: c}))
	t.Cleanup(klog.ClearLogger)
	return c
}

func (c *capturedLogs) add(entry string) {
	c.mu.Lock()
	c.entries = append(c.entries, entry)
	c.mu.Unlock()
}

// assertNoRunLonger fails for every log entry holding more than limit
// consecutive copies of r, and when no entry holds some of them (the
// failure was not logged, or not captured).
func (c *capturedLogs) assertNoRunLonger(t *testing.T, r rune, limit int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	run, some := strings.Repeat(string(r), limit+1), strings.Repeat(string(r), 32)
	logged := false
	for _, e := range c.entries {
		if strings.Contains(e, run) {
			t.Errorf("a log entry of %d bytes repeats the provider's message beyond %d bytes: %.300s...", len(e), limit, e)
		}
		logged = logged || strings.Contains(e, some)
	}
	if !logged {
		t.Errorf("none of %d log entries shows the provider's message", len(c.entries))
	}
}

// captureSink renders every entry, with its error and key/value pairs, as
// one string.
type captureSink struct {
	c      *capturedLogs
	name   string
	values []any
}

func (s *captureSink) Init(logr.RuntimeInfo) {}
func (s *captureSink) Enabled(int) bool      { return true }

func (s *captureSink) Info(level int, msg string, kv ...any) {
	s.c.add(fmt.Sprintf("%s I%d %q %v %v", s.name, level, msg, s.values, kv))
}

func (s *captureSink) Error(err error, msg string, kv ...any) {
	s.c.add(fmt.Sprintf("%s E %q err=%v %v %v", s.name, msg, err, s.values, kv))
}

func (s *captureSink) WithValues(kv ...any) logr.LogSink {
	return &captureSink{c: s.c, name: s.name, values: append(append([]any{}, s.values...), kv...)}
}

func (s *captureSink) WithName(name string) logr.LogSink {
	return &captureSink{c: s.c, name: s.name + "/" + name, values: s.values}
}
