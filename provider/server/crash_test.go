package server

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/internal/klogtest"
	"github.com/keymount/keymount/internal/unixsocket"
	"github.com/keymount/keymount/provider/v1alpha1"
)

func TestMountPanicIsInternal(t *testing.T) {
	buf := klogtest.Capture(t)

	r := serve(t, socketDir(t), providerFunc(func(_ context.Context, req *MountRequest) (*MountResult, error) {
		if req.Attributes["panic"] == "yes" {
			versions := []ObjectVersion{}
			_ = versions[len(req.Attributes)] // a provider bug: index out of range
		}
		return &MountResult{Versions: []ObjectVersion{{ID: "a", Version: "1"}}}, nil
	}))

	_, err := r.client.Mount(t.Context(), &v1alpha1.MountRequest{
		Attributes: `{"panic":"yes"}`, Secrets: `{"token":"SECRETVALUE"}`, Permission: "420",
	})
	if got := status.Code(err); got != codes.Internal {
		t.Fatalf("Mount code = %v, want Internal (err %v)", got, err)
	}
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "/v1alpha1.CSIDriverProvider/Mount") || !strings.Contains(msg, "panicked") {
		t.Errorf("message %q does not say that Mount panicked", msg)
	}
	log := buf.String()
	// Logged once, by the recovery: the panic skips the failure log.
	if n, m := strings.Count(log, `"recovered a panic"`), strings.Count(log, `"provider call failed"`); n != 1 || m != 0 {
		t.Errorf("panic logged %d times and as a failed call %d times, want once and never:\n%s", n, m, log)
	}
	if !strings.Contains(log, `panic="runtime error: index out of range [1] with length 0"`) {
		t.Errorf("log lacks the panic value:\n%s", log)
	}
	if strings.Contains(log, "SECRETVALUE") {
		t.Errorf("log holds the request's secrets:\n%s", log)
	}

	// The server survived and keeps serving.
	if _, err := r.client.Version(t.Context(), &v1alpha1.VersionRequest{}); err != nil {
		t.Errorf("Version after the panic: %v", err)
	}
	resp, err := r.client.Mount(t.Context(), &v1alpha1.MountRequest{Attributes: `{}`, Secrets: `{}`, Permission: "420"})
	if err != nil || len(resp.GetObjectVersion()) != 1 {
		t.Errorf("Mount after the panic = %v, %v; want one object version", resp, err)
	}
}

func TestServeRefusesSocketInUse(t *testing.T) {
	dir := socketDir(t)
	first := serve(t, dir, providerFunc(func(context.Context, *MountRequest) (*MountResult, error) { return &MountResult{}, nil }))
	before, err := os.Lstat(first.srv.SocketPath())
	if err != nil {
		t.Fatal(err)
	}

	second, err := New(Config{Name: "fake", Version: "2", SocketDir: dir}, providerFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err = second.Serve(ctx)
	if !errors.Is(err, unixsocket.ErrInUse) {
		t.Fatalf("second Serve = %v, want an error wrapping unixsocket.ErrInUse", err)
	}
	if !strings.Contains(err.Error(), first.srv.SocketPath()) {
		t.Errorf("error %q does not name the socket", err)
	}

	// The first server's socket is untouched and it keeps serving.
	after, err := os.Lstat(first.srv.SocketPath())
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("the first server's socket was replaced or removed: %v", err)
	}
	got, err := first.client.Version(t.Context(), &v1alpha1.VersionRequest{})
	if err != nil || got.GetRuntimeVersion() != "1.2.3" {
		t.Errorf("Version from the first server = %v, %v; want runtime version 1.2.3", got, err)
	}
}
