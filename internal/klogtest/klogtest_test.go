package klogtest

import (
	"strings"
	"sync"
	"testing"

	"k8s.io/klog/v2"
)

func TestCapture(t *testing.T) {
	t.Run("captured", func(t *testing.T) {
		buf := Capture(t)
		klog.InfoS("hello", "key", "v")
		klog.Flush()
		if out := buf.String(); !strings.Contains(out, `"hello" key="v"`) {
			t.Errorf("captured:\n%s", out)
		}
	})
	// After the subtest the logger is cleared: a new capture sees only its
	// own lines.
	buf := Capture(t)
	klog.InfoS("second")
	klog.Flush()
	if out := buf.String(); strings.Contains(out, "hello") || !strings.Contains(out, `"second"`) {
		t.Errorf("second capture:\n%s", out)
	}
}

func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := len(b.String()); n != 400 {
		t.Errorf("%d bytes, want 400", n)
	}
}
