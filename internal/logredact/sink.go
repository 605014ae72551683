package logredact

import "github.com/go-logr/logr"

// Logger returns l with every Info and Error call filtered as Filter
// filters klog's: for a logger klog hands calls to directly (contextual
// logging, as with the JSON format), where klog's own filter never runs.
func Logger(l logr.Logger) logr.Logger {
	return logr.New(&sink{s: l.GetSink()})
}

// sink filters the calls of the sink it wraps.
type sink struct{ s logr.LogSink }

var (
	_ logr.LogSink          = (*sink)(nil)
	_ logr.CallDepthLogSink = (*sink)(nil)
)

// Init passes the runtime information on, one frame deeper for sink's own.
func (k *sink) Init(info logr.RuntimeInfo) {
	info.CallDepth++
	k.s.Init(info)
}

// Enabled asks the wrapped sink.
func (k *sink) Enabled(level int) bool { return k.s.Enabled(level) }

// Info logs msg with its key/value pairs filtered.
func (k *sink) Info(level int, msg string, kv ...any) {
	msg, kv = Filter{}.FilterS(msg, kv)
	k.s.Info(level, msg, kv...)
}

// Error logs msg with its key/value pairs filtered.
func (k *sink) Error(err error, msg string, kv ...any) {
	msg, kv = Filter{}.FilterS(msg, kv)
	k.s.Error(err, msg, kv...)
}

// WithValues keeps the filter on the derived sink.
func (k *sink) WithValues(kv ...any) logr.LogSink { return &sink{s: k.s.WithValues(kv...)} }

// WithName keeps the filter on the derived sink.
func (k *sink) WithName(name string) logr.LogSink { return &sink{s: k.s.WithName(name)} }

// WithCallDepth keeps the filter on the derived sink.
func (k *sink) WithCallDepth(depth int) logr.LogSink {
	if c, ok := k.s.(logr.CallDepthLogSink); ok {
		return &sink{s: c.WithCallDepth(depth)}
	}
	return k
}
