package driver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/targetpath"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/atomicwrite"
	"github.com/keymount/keymount/provider/providerclient"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// TestErrorTypes: each kind of failure, wrapped as the pipeline wraps it,
// has the reason upstream's NodePublishVolume and rotation reconciler give
// the same failure.
func TestErrorTypes(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("publish volume csi-a: %w", err) }
	apiDown := errors.New("dial tcp 10.0.0.1:443: connection refused")
	for _, tc := range []struct {
		name              string
		err               error
		publish, rotation string
	}{
		{"class missing", classLookupFailed(fmt.Errorf("%w: %q", class.ErrNotFound, "db")),
			"SecretProviderClassNotFound", "SecretProviderClassNotFound"},
		{"class unreadable", classLookupFailed(fmt.Errorf("get secretproviderclass shop/db: %w", apiDown)),
			"SecretProviderClassNotFound", "SecretProviderClassNotFound"},
		{"class invalid", classLookupFailed(fmt.Errorf("%w: spec.provider is empty", class.ErrInvalid)),
			"FailedToMount", "FailedToRotate"},
		{"provider's own code, a gRPC code's name", wrap(&providerclient.ProviderError{Provider: "aws", Code: codes.PermissionDenied, ErrorCode: "PermissionDenied"}),
			"PermissionDenied", "PermissionDenied"},
		{"provider's own code, upstream's reason", wrap(&providerclient.ProviderError{Provider: "aws", Code: codes.Internal, ErrorCode: "FileWriteError"}),
			"FileWriteError", "FileWriteError"},
		{"provider's own code, any other string", wrap(&providerclient.ProviderError{Provider: "aws", Code: codes.PermissionDenied, ErrorCode: "AccessDeniedException"}),
			"GRPCProviderError", "GRPCProviderError"},
		{"provider's own code, request data in it", wrap(&providerclient.ProviderError{Provider: "aws", Code: codes.Internal, ErrorCode: "no-such-object-db-7f3a"}),
			"GRPCProviderError", "GRPCProviderError"},
		{"provider call failed", wrap(&providerclient.ProviderError{Provider: "aws", Code: codes.Unavailable}),
			"GRPCProviderError", "GRPCProviderError"},
		{"provider answer broke the contract", wrap(fmt.Errorf("%w: no object_version", providerclient.ErrInvalidResponse)),
			"GRPCProviderError", "GRPCProviderError"},
		{"provider without a socket", wrap(fmt.Errorf("%w %q", providerclient.ErrProviderNotFound, "aws")),
			"", "FailedToLookupProviderGRPCClient"},
		{"provider name invalid", wrap(fmt.Errorf("%w %q", providerclient.ErrInvalidProviderName, "a/b")),
			"", "FailedToLookupProviderGRPCClient"},
		{"content too large", wrap(fmt.Errorf("%w: 2 MiB", errTooLarge)), "FileWriteError", "FileWriteError"},
		{"provider file refused", wrap(fmt.Errorf("%w: mode 01777", errInvalidProviderFile)), "FileWriteError", "FileWriteError"},
		{"volume full", wrap(fmt.Errorf("%w: %w", atomicwrite.ErrNoSpace, errors.New("ENOSPC"))), "FileWriteError", "FileWriteError"},
		{"file path refused", wrap(fmt.Errorf("%w: ../x", atomicwrite.ErrInvalidPath)), "FileWriteError", "FileWriteError"},
		{"file mode refused", wrap(fmt.Errorf("%w: 04755", atomicwrite.ErrInvalidMode)), "FileWriteError", "FileWriteError"},
		{"provider wrote too much", wrap(fmt.Errorf("%w: 5 MiB", volume.ErrStagedTooLarge)), "FileWriteError", "FileWriteError"},
		{"target crosses a symlink", wrap(fmt.Errorf("%w: pods/uid", targetpath.ErrSymlink)), "FailedToEnsureMountPoint", "UnexpectedTargetPath"},
		{"target shows something else", wrap(fmt.Errorf("%w: mount", volume.ErrTargetInUse)), "FailedToEnsureMountPoint", "UnexpectedTargetPath"},
		{"request malformed", invalidf("volume capability is missing"), "FailedToMount", "FailedToRotate"},
		{"volume busy", fmt.Errorf("%w: csi-a", errBusy), "FailedToMount", "FailedToRotate"},
		{"API server unreachable", wrap(fmt.Errorf("%w: not connected", ErrAPIUnavailable)), "FailedToMount", "FailedToRotate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := publishErrorType(tc.err); got != tc.publish {
				t.Errorf("publish error_type = %q, want %q", got, tc.publish)
			}
			if got := rotationErrorType(tc.err); got != tc.rotation {
				t.Errorf("rotation error_type = %q, want %q", got, tc.rotation)
			}
		})
	}
}

// TestClassLookupKeepsItsMessageAndCode: marking a class lookup changes
// neither what kubelet reads nor the code it gets.
func TestClassLookupKeepsItsMessageAndCode(t *testing.T) {
	inner := fmt.Errorf("%w: %q in namespace %q: create it", class.ErrNotFound, "db", "shop")
	err := classLookupFailed(inner)
	if err.Error() != inner.Error() {
		t.Errorf("message %q, want %q", err.Error(), inner.Error())
	}
	if c := status.Code(toStatus(err)); c != codes.FailedPrecondition {
		t.Errorf("code %s, want FailedPrecondition", c)
	}
}

// TestErrorTypesThroughTheNode: failures of a real publish and of real
// refreshes reach the metrics with upstream's reason, and the code kubelet
// got apart from it.
func TestErrorTypesThroughTheNode(t *testing.T) {
	n := newTestNode(t)
	m := &recordingMetrics{}
	n.srv.d.deps.Metrics = m
	target := n.target("secrets")
	fail := func(err error) { n.provider.writeOwn = func(string) error { return err } }
	publishFails := func(what string, wantCode codes.Code, wantType string) {
		t.Helper()
		if err := n.publish(t, n.target("fresh")); status.Code(err) != wantCode {
			t.Fatalf("%s: first publish = %v, want %s", what, err, wantCode)
		}
		m.check(t, what+": code", &m.publishes, " "+wantCode.String())
		m.check(t, what+": error_type", &m.publishTypes, wantType)
	}
	refreshFails := func(what, wantType string) {
		t.Helper()
		if err := n.publish(t, target); err != nil {
			t.Fatalf("%s: a failed refresh keeps the volume and answers OK, got %v", what, err)
		}
		m.check(t, what+": refresh", &m.rotations, wantType)
		m.take(&m.publishes)
	}

	fail(&providerclient.ProviderError{Provider: "scripted", Code: codes.PermissionDenied, ErrorCode: "PermissionDenied"})
	if err := n.publish(t, n.target("fresh")); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("provider's code: %v", err)
	}
	m.check(t, "provider's code", &m.publishTypes, "PermissionDenied")
	m.take(&m.publishes)
	fail(&providerclient.ProviderError{Provider: "scripted", Code: codes.Unavailable})
	publishFails("provider down", codes.Unavailable, "GRPCProviderError")
	fail(fmt.Errorf("%w %q: no socket in %s", providerclient.ErrProviderNotFound, "scripted", n.base))
	publishFails("provider without a socket", codes.FailedPrecondition, "")
	n.provider.writeOwn = nil
	n.provider.files = []*v1alpha1.File{{Path: "a", Mode: 0o4755, Contents: []byte("x")}}
	publishFails("file mode refused", codes.InvalidArgument, "FileWriteError")

	n.provider.files = []*v1alpha1.File{{Path: "a", Mode: 0o644, Contents: []byte("x")}}
	if err := n.publish(t, target); err != nil {
		t.Fatal(err)
	}
	m.check(t, "first publish", &m.publishes, "scripted OK")
	fail(&providerclient.ProviderError{Provider: "scripted", Code: codes.Unavailable})
	refreshFails("provider down", "GRPCProviderError")
	fail(fmt.Errorf("%w %q", providerclient.ErrProviderNotFound, "scripted"))
	refreshFails("provider without a socket", "FailedToLookupProviderGRPCClient")
	n.provider.writeOwn = nil
	if err := n.publish(t, target); err != nil {
		t.Fatal(err)
	}
	m.check(t, "successful refresh", &m.rotations, "")
	m.take(&m.publishes)

	renamed := "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nmetadata:\n  name: other\nspec:\n  provider: scripted\n"
	if err := os.WriteFile(filepath.Join(n.base, "spc.yaml"), []byte(renamed), 0o600); err != nil {
		t.Fatal(err)
	}
	refreshFails("class deleted", "SecretProviderClassNotFound")
	publishFails("class missing", codes.FailedPrecondition, "SecretProviderClassNotFound")

	req := validRequest()
	req.VolumeCapability = nil
	if _, err := n.srv.NodePublishVolume(t.Context(), req); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("publish without a capability: %v", err)
	}
	m.check(t, "request malformed", &m.publishTypes, "FailedToMount")
}
