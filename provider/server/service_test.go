package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/internal/klogtest"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// TestMountFailureCarriesBoth checks the adapter's failed answer: a response
// with error.code and the status error. Over gRPC only the status arrives.
func TestMountFailureCarriesBoth(t *testing.T) {
	svc := &service{cfg: Config{Name: "fake"}, provider: providerFunc(func(context.Context, *MountRequest) (*MountResult, error) {
		return nil, fmt.Errorf("object %q: %w", "x", ErrNotFound)
	})}
	resp, err := svc.Mount(t.Context(), &v1alpha1.MountRequest{Attributes: `{}`})
	if got := status.Code(err); got != codes.NotFound {
		t.Errorf("status code = %v, want NotFound", got)
	}
	if got := resp.GetError().GetCode(); got != "NotFound" {
		t.Errorf("error.code = %q, want NotFound", got)
	}
	// gRPC drops the response: error.code also travels as a status detail.
	details := status.Convert(err).Details()
	if e, ok := firstDetail(details).(*v1alpha1.Error); !ok || len(details) != 1 || e.GetCode() != "NotFound" {
		t.Errorf("status details = %v, want [Error{code: NotFound}]", details)
	}

	resp, err = svc.Mount(t.Context(), &v1alpha1.MountRequest{Attributes: `{`})
	if got := status.Code(err); got != codes.InvalidArgument {
		t.Errorf("status code = %v, want InvalidArgument", got)
	}
	if got := resp.GetError().GetCode(); got != "InvalidArgument" {
		t.Errorf("error.code = %q, want InvalidArgument", got)
	}
}

func TestFailedMountLogsOnceWithoutSecrets(t *testing.T) {
	buf := klogtest.Capture(t)

	r := serve(t, socketDir(t), providerFunc(func(context.Context, *MountRequest) (*MountResult, error) {
		return nil, fmt.Errorf("object %q not found under root: %w", "db/password", ErrNotFound)
	}))
	_, err := r.client.Mount(t.Context(), &v1alpha1.MountRequest{
		Attributes: `{"objects":"ATTRVALUE"}`,
		Secrets:    `{"token":"SECRETVALUE"}`,
		TargetPath: "/target/mount",
	})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("Mount = %v, want NotFound", err)
	}
	klog.Flush()

	out := buf.String()
	if n := strings.Count(out, "provider call failed"); n != 1 {
		t.Errorf("%d failure lines, want 1:\n%s", n, out)
	}
	for _, want := range []string{`provider="fake"`, `code="NotFound"`, `targetPath="/target/mount"`, `db/password`, `/v1alpha1.CSIDriverProvider/Mount`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	for _, leak := range []string{"ATTRVALUE", "SECRETVALUE"} {
		if strings.Contains(out, leak) {
			t.Errorf("log leaks %s:\n%s", leak, out)
		}
	}
}

func firstDetail(details []any) any {
	if len(details) == 0 {
		return nil
	}
	return details[0]
}
