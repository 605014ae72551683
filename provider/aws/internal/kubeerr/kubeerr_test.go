package kubeerr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/keymount/keymount/provider/server"
)

func TestClassify(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"forbidden", apierrors.NewForbidden(pods, "p", errors.New("no RBAC")), server.ErrFailedPrecondition},
		{"unauthorized", apierrors.NewUnauthorized("expired"), server.ErrFailedPrecondition},
		{"not found", apierrors.NewNotFound(pods, "p"), server.ErrFailedPrecondition},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), server.ErrUnavailable},
		{"server timeout", apierrors.NewServerTimeout(pods, "get", 1), server.ErrUnavailable},
		{"internal", apierrors.NewInternalError(errors.New("etcd")), server.ErrUnavailable},
		{"unreachable", &url.Error{Op: "Get", URL: "https://10.0.0.1/api", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, server.ErrUnavailable},
		{"deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), context.DeadlineExceeded},
		{"canceled", context.Canceled, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify(tc.err)
			if !errors.Is(got, tc.want) || !errors.Is(got, tc.err) {
				t.Errorf("Classify(%v) = %v, want it to match %v and the cause", tc.err, got, tc.want)
			}
			if got.Error() != tc.err.Error() {
				t.Errorf("message changed: %q", got.Error())
			}
			other := server.ErrUnavailable
			if errors.Is(tc.want, server.ErrUnavailable) {
				other = server.ErrFailedPrecondition
			}
			if errors.Is(got, other) {
				t.Errorf("Classify(%v) also matches %v", tc.err, other)
			}
		})
	}
	if Classify(nil) != nil {
		t.Error("Classify(nil) != nil")
	}
}
