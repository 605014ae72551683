package grpcrecover

import (
	"context"
	"fmt"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// maxStack is how many bytes of the panicking goroutine's stack are logged.
const maxStack = 8 << 10

// UnaryServerInterceptor recovers a panic in the rest of a unary call.
func UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				resp, err = nil, recovered(info.FullMethod, r)
			}
		}()
		return handler(ctx, req)
	}
}

// StreamServerInterceptor recovers a panic in the rest of a streaming call.
func StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = recovered(info.FullMethod, r)
			}
		}()
		return handler(srv, ss)
	}
}

// recovered logs a recovered panic and returns the error the caller gets.
// It runs in the deferred function, so the stack still shows the panic.
func recovered(method string, r any) error {
	klog.ErrorS(nil, "grpc handler panicked", "method", method, "panic", fmt.Sprint(r), "stack", trim(debug.Stack(), maxStack))
	return status.Errorf(codes.Internal, "internal error in %s: the handler panicked; see the driver/provider log", method)
}

// trim returns the first limit bytes of stack, marked when cut.
func trim(stack []byte, limit int) string {
	if len(stack) <= limit {
		return string(stack)
	}
	return string(stack[:limit]) + "\n... (stack truncated)"
}
