package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/atomicwrite"
	"github.com/keymount/keymount/provider/providerclient"
)

func TestToStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want codes.Code
	}{
		{"invalid request", invalidf("volume ID is empty"), codes.InvalidArgument},
		{"busy", fmt.Errorf("%w on volume v", errBusy), codes.Aborted},
		{"class not found", fmt.Errorf("resolve: %w", class.ErrNotFound), codes.FailedPrecondition},
		{"class invalid", fmt.Errorf("resolve: %w", class.ErrInvalid), codes.FailedPrecondition},
		{"provider name", fmt.Errorf("x: %w", providerclient.ErrInvalidProviderName), codes.FailedPrecondition},
		{"provider missing", fmt.Errorf("x: %w", providerclient.ErrProviderNotFound), codes.FailedPrecondition},
		{"volume not found", fmt.Errorf("x: %w", volume.ErrNotFound), codes.NotFound},
		{"provider code kept", fmt.Errorf("mount: %w", &providerclient.ProviderError{Provider: "aws", Code: codes.PermissionDenied}), codes.PermissionDenied},
		{"provider unknown becomes internal", &providerclient.ProviderError{Provider: "aws", Code: codes.Unknown}, codes.Internal},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{"canceled", fmt.Errorf("call: %w", context.Canceled), codes.Canceled},
		{"bad provider path", fmt.Errorf("write: %w", atomicwrite.ErrInvalidPath), codes.Internal},
		{"bad provider response", fmt.Errorf("x: %w", providerclient.ErrInvalidResponse), codes.Internal},
		{"plain error", errors.New("disk on fire"), codes.Internal},
		{"forbidden", fmt.Errorf("get class: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "secretproviderclasses"}, "x", errors.New("rbac"))), codes.PermissionDenied},
		{"not connected yet", fmt.Errorf("read class: %w: not connected", ErrAPIUnavailable), codes.Unavailable},
		{"not connected, deadline", fmt.Errorf("%w: %w", ErrAPIUnavailable, context.DeadlineExceeded), codes.Unavailable},
		{"API server unreachable", fmt.Errorf("get class: %w", &url.Error{Op: "Get", URL: "https://127.0.0.1:6443",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}), codes.Unavailable},
		{"API server unavailable", fmt.Errorf("get class: %w", apierrors.NewServiceUnavailable("shutting down")), codes.Unavailable},
		{"API server throttles", fmt.Errorf("get class: %w", apierrors.NewTooManyRequests("later", 1)), codes.Unavailable},
		{"bare status kept", status.Error(codes.ResourceExhausted, "slow down"), codes.ResourceExhausted},
		{"bare unknown status", status.Error(codes.Unknown, "what"), codes.Internal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := toStatus(tc.err)
			if c := status.Code(got); c != tc.want {
				t.Fatalf("toStatus(%v) code = %v, want %v", tc.err, c, tc.want)
			}
		})
	}
	if toStatus(nil) != nil {
		t.Fatal("toStatus(nil) must be nil")
	}
}

func TestToStatusKeepsMessage(t *testing.T) {
	err := toStatus(fmt.Errorf("resolve: %w: %q", class.ErrNotFound, "db-creds"))
	if msg := status.Convert(err).Message(); msg != `resolve: secretproviderclass not found: "db-creds"` {
		t.Fatalf("message = %q", msg)
	}
}

func TestVolumeLocks(t *testing.T) {
	l := volumeLocks{held: map[string]struct{}{}}
	release, err := l.acquire("v1", "/t1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.acquire("v1", "/t9"); !errors.Is(err, errBusy) {
		t.Fatalf("same volume, other target: err = %v, want errBusy", err)
	}
	if _, err := l.acquire("v9", "/t1"); !errors.Is(err, errBusy) {
		t.Fatalf("other volume, same target: err = %v, want errBusy", err)
	}
	other, err := l.acquire("v2", "/t2")
	if err != nil {
		t.Fatalf("other volume and target must not be blocked: %v", err)
	}
	other()
	release()
	again, err := l.acquire("v1", "/t1")
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	again()
	if len(l.held) != 0 {
		t.Fatalf("locks left held: %v", l.held)
	}
}
