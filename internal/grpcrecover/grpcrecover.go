package grpcrecover

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/internal/panics"
)

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

// recovered reports a recovered panic (internal/panics: one log line and
// the keymount_panics_recovered_total metric) and returns the error the
// caller gets. It runs in the deferred function, so the stack still shows
// the panic.
func recovered(method string, r any) error {
	panics.Report(panics.GRPC, method, r)
	return status.Errorf(codes.Internal, "internal error in %s: the handler panicked; see the driver/provider log", method)
}
