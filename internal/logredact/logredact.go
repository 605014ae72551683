package logredact

import (
	"fmt"
	"strings"

	"k8s.io/klog/v2"
)

// bodyMessages are the messages client-go logs HTTP bodies with.
var bodyMessages = map[string]bool{"Request Body": true, "Response Body": true}

// Filter redacts HTTP bodies from klog calls. It implements klog.LogFilter.
type Filter struct{}

var _ klog.LogFilter = Filter{}

// Install makes every klog call of the process go through Filter. Call it
// from main, before anything logs.
func Install() {
	klog.SetLogFilter(Filter{})
}

// Filter passes the arguments of a plain Info call through.
func (Filter) Filter(args []any) []any { return args }

// FilterF redacts the arguments of a printf-style call about a body.
func (Filter) FilterF(format string, args []any) (string, []any) {
	if strings.Contains(format, "Request Body") || strings.Contains(format, "Response Body") {
		return format, redactAll(args)
	}
	return format, args
}

// FilterS redacts the body of client-go's structured body logs.
func (Filter) FilterS(msg string, kv []any) (string, []any) {
	if !bodyMessages[msg] {
		return msg, kv
	}
	out := make([]any, len(kv))
	copy(out, kv)
	for i := 0; i+1 < len(out); i += 2 {
		if key, ok := out[i].(string); ok && key == "body" {
			out[i+1] = redacted(out[i+1])
		}
	}
	return msg, out
}

func redactAll(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = redacted(a)
	}
	return out
}

// redacted replaces a value by its size. A value already redacted (klog's
// filter ran before a redacting logr sink) is kept.
func redacted(v any) string {
	switch b := v.(type) {
	case string:
		if strings.HasPrefix(b, "<redacted") {
			return b
		}
		return fmt.Sprintf("<redacted: %d bytes>", len(b))
	case []byte:
		return fmt.Sprintf("<redacted: %d bytes>", len(b))
	}
	return "<redacted>"
}
