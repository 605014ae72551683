package server

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// APIVersion is the provider API version the kit speaks.
const APIVersion = "v1alpha1"

// Provider is what a provider implements; the kit does the gRPC plumbing.
type Provider interface {
	// Mount returns the files of one volume. Wrap ErrNotFound,
	// ErrPermissionDenied or ErrInvalidParameters (or return a gRPC status
	// error) to choose the code the driver sees; other errors are Internal.
	Mount(ctx context.Context, req *MountRequest) (*MountResult, error)
}

// service adapts a Provider to the v1alpha1 gRPC service.
type service struct {
	v1alpha1.UnimplementedCSIDriverProviderServer

	cfg      Config
	provider Provider
}

var _ v1alpha1.CSIDriverProviderServer = (*service)(nil)

func (s *service) Version(context.Context, *v1alpha1.VersionRequest) (*v1alpha1.VersionResponse, error) {
	return &v1alpha1.VersionResponse{
		Version:        APIVersion,
		RuntimeName:    s.cfg.Name,
		RuntimeVersion: s.cfg.Version,
	}, nil
}

// Mount parses the request, calls the provider and converts the result. On
// failure it returns the status error with error.code as a detail.
func (s *service) Mount(ctx context.Context, wire *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	req, err := parseRequest(wire)
	if err != nil {
		return failed(status.New(codes.InvalidArgument, err.Error()))
	}
	res, err := s.provider.Mount(ctx, req)
	if err != nil {
		return failed(statusOf(err))
	}
	resp, err := toWire(res)
	if err != nil {
		return failed(status.New(codes.Internal, err.Error()))
	}
	return resp, nil
}

// failed answers a failed mount. gRPC drops a response sent with an error,
// so error.code also travels as a status detail (the contract's own Error
// message): drivers that read details get it beside the code and message,
// older drivers ignore it.
func failed(st *status.Status) (*v1alpha1.MountResponse, error) {
	e := &v1alpha1.Error{Code: st.Code().String()}
	if withCode, err := st.WithDetails(e); err == nil {
		st = withCode
	}
	return &v1alpha1.MountResponse{Error: e}, st.Err()
}

// logFailures logs each failed call once, and at verbosity 4 each call,
// without the request: attributes, secrets and file contents never reach
// the log.
func logFailures(provider string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		if err != nil {
			kv := []any{"provider", provider, "method", info.FullMethod, "code", status.Code(err), "duration", time.Since(start)}
			if tp := targetPathOf(req); tp != "" {
				kv = append(kv, "targetPath", tp)
			}
			klog.ErrorS(err, "provider call failed", kv...)
		} else if tp := targetPathOf(req); tp != "" {
			klog.V(4).InfoS("provider call", "provider", provider, "method", info.FullMethod,
				"targetPath", tp, "duration", time.Since(start))
		}
		return resp, err
	}
}

// targetPathOf is the target path a request names, for the log.
func targetPathOf(req any) string {
	switch r := req.(type) {
	case *v1alpha1.MountRequest:
		return r.GetTargetPath()
	case *keymountv1.UnpublishRequest:
		return r.GetTargetPath()
	}
	return ""
}
