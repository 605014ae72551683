package panics

import (
	"fmt"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// Where a panic was recovered: the handler label of the metric.
const (
	GRPC     = "grpc"     // a gRPC call (CSI, provider)
	Trigger  = "trigger"  // a refresh trigger or the refresh it started
	Reporter = "reporter" // a write of the cluster side (status, Secrets, events)
	Informer = "informer" // an informer event handler
	Sweep    = "sweep"    // a periodic background job
)

// maxStack is how many bytes of the panicking goroutine's stack are logged.
const maxStack = 8 << 10

// recovered counts the recovered panics by handler. It is process-wide, as
// panics are: each binary registers it (Collector) with its metrics.
var recovered = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "keymount_panics_recovered_total",
	Help: "Panics recovered (a keymount bug: the work in hand failed, the process kept serving), by handler: grpc, trigger, reporter, informer or sweep.",
}, []string{"handler"})

func init() {
	for _, h := range []string{GRPC, Trigger, Reporter, Informer, Sweep} {
		recovered.WithLabelValues(h)
	}
}

// Collector is the counter of recovered panics, for a metrics registry.
func Collector() prometheus.Collector { return recovered }

// Recover recovers (deferred) a panic of the goroutine, reports it
// (Report) and lets the deferring function return normally with its
// named results as they stand. what says what was running, for the log.
func Recover(handler, what string) {
	if r := recover(); r != nil {
		Report(handler, what, r)
	}
}

// RecoverAs recovers (deferred) a panic as Recover does and sets *err to
// an error naming what panicked, so that the caller treats it as a
// failure (and retries it as one).
func RecoverAs(handler, what string, err *error) {
	if r := recover(); r != nil {
		Report(handler, what, r)
		*err = fmt.Errorf("%s panicked: %v (a keymount bug; see the log)", what, r)
	}
}

// Report logs a recovered panic value r once and counts it. Call it from
// the deferred function that recovered, so the stack still shows the panic.
func Report(handler, what string, r any) {
	recovered.WithLabelValues(handler).Inc()
	klog.ErrorS(nil, "recovered a panic", "handler", handler, "in", what, "panic", fmt.Sprint(r), "stack", trim(debug.Stack(), maxStack))
}

// trim returns the first limit bytes of stack, marked when cut.
func trim(stack []byte, limit int) string {
	if len(stack) <= limit {
		return string(stack)
	}
	return string(stack[:limit]) + "\n... (stack truncated)"
}
