package aws_test

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/internal/satoken/satokentest"
	"github.com/keymount/keymount/provider/aws/identity"
	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/providerclient"
	"github.com/keymount/keymount/provider/server"
)

// TestPushOverTheProviderSocket: served as server.Config.Pusher, the
// pusher answers keymount-controller's client on the provider socket: one
// result per item; a token that proves another ServiceAccount refuses the
// whole request with PermissionDenied, as a mount's would be.
func TestPushOverTheProviderSocket(t *testing.T) {
	e := newPushEnv(t)
	dir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, "aws.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Name: "aws", Pusher: e.pusher}, e.provider)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	client, err := providerclient.New(providerclient.Config{Dirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })

	attrs := func(a map[string]string) string {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	items := []*keymountv1.PushItem{{RemoteKey: "app/db", Value: []byte("v"), Owner: owner}, {RemoteKey: "x", ObjectType: "nope"}}
	res, err := client.Push(t.Context(), "aws", &keymountv1.PushRequest{Attributes: attrs(e.attrs), Secrets: "{}", Items: items})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].GetOutcome() != created || res[1].GetOutcome() != failedOut {
		t.Errorf("outcomes %v, %v: want CREATED, FAILED", res[0].GetOutcome(), res[1].GetOutcome())
	}
	res, err = client.Remove(t.Context(), "aws", &keymountv1.RemoveRequest{Attributes: attrs(e.attrs), Secrets: "{}",
		Items: []*keymountv1.PushItem{{RemoteKey: "app/db", LastVersion: res[0].GetVersion()}}})
	if err != nil || res[0].GetOutcome() != removed {
		t.Errorf("Remove: %v, %v", res, err)
	}

	other := e.iss.Sign(t, satokentest.Token{Audiences: []string{identity.AudienceSTS}, Namespace: "shop", ServiceAccount: "other"})
	_, err = client.Push(t.Context(), "aws", &keymountv1.PushRequest{Attributes: attrs(withToken(t, e.attrs, identity.AudienceSTS, other)),
		Secrets: "{}", Items: items})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("Push with another account's token: %v, want PermissionDenied", err)
	}
}
