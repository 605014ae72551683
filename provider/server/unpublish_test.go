package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/provider/keymountv1"
)

// recordingUnpublisher records the requests it got and answers err.
type recordingUnpublisher struct {
	mu   sync.Mutex
	got  []UnpublishRequest
	fail error
}

func (u *recordingUnpublisher) Unpublish(_ context.Context, req *UnpublishRequest) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.got = append(u.got, *req)
	return u.fail
}

func (u *recordingUnpublisher) requests() []UnpublishRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]UnpublishRequest(nil), u.got...)
}

func notMounting() Provider {
	return providerFunc(func(context.Context, *MountRequest) (*MountResult, error) { return nil, errors.New("not called") })
}

const (
	testUID    = "3f2a1b4c-5d6e-4f70-8192-a3b4c5d6e7f8"
	testTarget = "/var/lib/kubelet/pods/" + testUID + "/volumes/kubernetes.io~csi/secrets/mount"
)

// TestUnpublishServed: with an Unpublisher the extension is served on the
// provider's socket beside v1alpha1, and a valid request reaches it parsed.
func TestUnpublishServed(t *testing.T) {
	u := &recordingUnpublisher{}
	r := serveConfig(t, Config{Name: "fake", SocketDir: socketDir(t), Unpublisher: u}, notMounting())
	if _, err := r.lifecycle.Unpublish(t.Context(), &keymountv1.UnpublishRequest{PodUid: testUID, VolumeName: "secrets", TargetPath: testTarget}); err != nil {
		t.Fatalf("Unpublish: %v", err)
	}
	want := []UnpublishRequest{{PodUID: testUID, VolumeName: "secrets", TargetPath: testTarget}}
	if d := cmp.Diff(want, u.requests()); d != "" {
		t.Errorf("requests (-want +got):\n%s", d)
	}
	if _, err := r.client.Version(t.Context(), nil); err != nil {
		t.Errorf("Version beside the extension: %v", err)
	}
}

// TestUnpublishNotServed: without an Unpublisher the driver gets
// Unimplemented, as from any provider that does not know the extension.
func TestUnpublishNotServed(t *testing.T) {
	r := serve(t, socketDir(t), notMounting())
	_, err := r.lifecycle.Unpublish(t.Context(), &keymountv1.UnpublishRequest{PodUid: testUID, VolumeName: "secrets", TargetPath: testTarget})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("Unpublish without an Unpublisher: %v, want Unimplemented", err)
	}
}

// TestUnpublishInvalid: a request that does not name a pod volume is
// refused with InvalidArgument naming the field, and never reaches the
// provider; a provider's error keeps its code.
func TestUnpublishInvalid(t *testing.T) {
	u := &recordingUnpublisher{}
	r := serveConfig(t, Config{Name: "fake", SocketDir: socketDir(t), Unpublisher: u}, notMounting())
	for _, tc := range []struct {
		name, uid, volume, target, field string
	}{
		{"empty", "", "", "", "pod_uid"},
		{"uid with a slash", "../../etc", "secrets", testTarget, "pod_uid"},
		{"uid not hex", "zzzzzzzz-5d6e-4f70-8192-a3b4c5d6e7f8", "secrets", testTarget, "pod_uid"},
		{"volume with a slash", testUID, "a/b", testTarget, "volume_name"},
		{"volume upper case", testUID, "Secrets", testTarget, "volume_name"},
		{"relative target", testUID, "secrets", testTarget[1:], "target_path"},
		{"target of another volume", testUID, "other", testTarget, "target_path"},
		{"target with dot-dot", testUID, "secrets", "/x/../" + testTarget[1:], "target_path"},
		{"target of another pod", "00000000-0000-4000-8000-000000000000", "secrets", testTarget, "target_path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.lifecycle.Unpublish(t.Context(), &keymountv1.UnpublishRequest{PodUid: tc.uid, VolumeName: tc.volume, TargetPath: tc.target})
			if status.Code(err) != codes.InvalidArgument || !containsField(err, tc.field) {
				t.Errorf("got %v, want InvalidArgument naming %s", err, tc.field)
			}
		})
	}
	if got := u.requests(); len(got) != 0 {
		t.Errorf("invalid requests reached the provider: %v", got)
	}
	// A static pod's UID (32 hex digits) is a pod UID.
	static := "0123456789abcdef0123456789abcdef"
	if _, err := r.lifecycle.Unpublish(t.Context(), &keymountv1.UnpublishRequest{PodUid: static, VolumeName: "v",
		TargetPath: "/k/pods/" + static + "/volumes/kubernetes.io~csi/v/mount"}); err != nil {
		t.Errorf("a static pod's volume: %v", err)
	}
	u.mu.Lock()
	u.fail = fmt.Errorf("vault: %w", ErrUnavailable)
	u.mu.Unlock()
	_, err := r.lifecycle.Unpublish(t.Context(), &keymountv1.UnpublishRequest{PodUid: testUID, VolumeName: "secrets", TargetPath: testTarget})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("a provider's failure: %v, want Unavailable", err)
	}
}

func containsField(err error, field string) bool {
	st, _ := status.FromError(err)
	return len(st.Message()) >= len(field) && st.Message()[:len(field)] == field
}
