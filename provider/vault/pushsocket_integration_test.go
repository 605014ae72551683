//go:build integration && vault

package vault_test

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"testing"

	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/providerclient"
	"github.com/keymount/keymount/provider/server"
)

// testOverTheSocket: the provider served as the binary serves it
// (server.Config.Pusher), called by the client keymount-controller uses
// over a real unix socket.
func (r *pushRig) testOverTheSocket(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.New(server.Config{Name: "vault", SocketDir: dir, Pusher: r.p}, r.p)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "vault.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	c, err := providerclient.New(providerclient.Config{Dirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	attrs, _ := json.Marshal(r.attrs(t, "pusher"))
	items := []*keymountv1.PushItem{{RemoteKey: "secret/data/socket", Value: []byte(`{"k":"v"}`), Owner: owner}}
	res, err := c.Push(t.Context(), "vault", &keymountv1.PushRequest{Attributes: string(attrs), Secrets: "{}", Items: items})
	if err != nil || len(res) != 1 || res[0].GetOutcome() != keymountv1.Outcome_OUTCOME_CREATED || res[0].GetVersion() != "1" {
		t.Fatalf("push over the socket: %v, %v; want CREATED at version 1", res, err)
	}
	items[0].LastVersion = "1"
	res, err = c.Remove(t.Context(), "vault", &keymountv1.RemoveRequest{Attributes: string(attrs), Secrets: "{}", Items: items})
	if err != nil || len(res) != 1 || res[0].GetOutcome() != keymountv1.Outcome_OUTCOME_REMOVED {
		t.Fatalf("remove over the socket: %v, %v; want REMOVED", res, err)
	}
}
