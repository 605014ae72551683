package driver

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/tests/poll"
)

// TestProviderHealthRounds: a round asks every provider of mounted volumes;
// until one has finished the driver is not ready; a provider that does not
// answer makes it not ready, named, and one that answers with an error
// status (Unimplemented) answered; a successful Mount marks its provider
// healthy at once; with checkAll a provider called since start but used by
// no mounted volume is checked and reported, without deciding readiness.
func TestProviderHealthRounds(t *testing.T) {
	answers := map[string]error{}
	used := []string{"a", "b"}
	hang := map[string]bool{}
	h := &providerHealth{
		timeout: 20 * time.Millisecond,
		used:    func() ([]string, error) { return used, nil },
		version: func(ctx context.Context, p string) error {
			if hang[p] {
				<-ctx.Done() // a provider that takes the call and never answers
				return status.FromContextError(ctx.Err()).Err()
			}
			return answers[p]
		},
	}
	if err := h.notReady(); err == nil {
		t.Fatal("ready before the first round")
	}
	answers["b"] = status.Error(codes.Unavailable, "connection refused")
	h.check(t.Context())
	err := h.notReady()
	if err == nil || !strings.Contains(err.Error(), `provider "b"`) || strings.Contains(err.Error(), `provider "a"`) {
		t.Fatalf("b down: %v, want not ready naming b only", err)
	}
	if got, want := h.healthy(), map[string]bool{"a": true, "b": false}; !maps.Equal(got, want) {
		t.Fatalf("health %v, want %v", got, want)
	}
	h.mounted("b")
	if err := h.notReady(); err != nil {
		t.Fatalf("after a successful Mount of b: %v, want ready", err)
	}

	answers["b"] = status.Error(codes.Unimplemented, "no Version here")
	h.check(t.Context())
	if err := h.notReady(); err != nil {
		t.Fatalf("b answering Unimplemented: %v, want ready (it answered)", err)
	}

	hang["a"] = true
	h.check(t.Context())
	if err := h.notReady(); err == nil || !strings.Contains(err.Error(), `provider "a" does not answer Version within 20ms`) {
		t.Fatalf("a hanging: %v, want not ready naming a and the timeout", err)
	}
	hang["a"] = false

	// checkAll: c was called, no mounted volume uses it.
	h.checkAll = true
	h.mounted("c")
	answers["c"] = errors.New("no socket")
	used = []string{"a"}
	h.check(t.Context())
	if err := h.notReady(); err != nil {
		t.Fatalf("c down but used by no mounted volume: %v, want ready", err)
	}
	if got, want := h.healthy(), map[string]bool{"a": true, "b": true, "c": false}; !maps.Equal(got, want) {
		t.Fatalf("health with checkAll %v, want %v (every provider called since start)", got, want)
	}
	h.checkAll = false
	h.check(t.Context())
	if got, want := h.healthy(), map[string]bool{"a": true}; !maps.Equal(got, want) {
		t.Fatalf("health without checkAll %v, want %v (the providers of mounted volumes)", got, want)
	}

	// A round cut short by the driver stopping gives no verdict.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	answers["a"] = context.Canceled
	h.check(ctx)
	if err := h.notReady(); err != nil {
		t.Fatalf("after a round cut short: %v, want the last verdict kept", err)
	}
}

// servedSocketNode serves the socket node's driver on a short CSI socket,
// and returns a CSI identity client and a /readyz server of it.
func servedSocketNode(t *testing.T, d *Driver, dir string) (csi.IdentityClient, *httptest.Server) {
	t.Helper()
	endpoint := "unix://" + filepath.Join(dir, "csi.sock")
	d.cfg.Endpoint = endpoint
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("driver stopped with %v", err)
		}
	})
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	srv := httptest.NewServer(d.HealthHandler())
	t.Cleanup(srv.Close)
	return csi.NewIdentityClient(conn), srv
}

// probe returns Probe's readiness and the reason it gives when not ready.
func probe(t *testing.T, id csi.IdentityClient) (bool, string) {
	t.Helper()
	var header metadata.MD
	resp, err := id.Probe(t.Context(), &csi.ProbeRequest{}, grpc.WaitForReady(true), grpc.Header(&header))
	if err != nil {
		t.Fatalf("Probe: %v (not ready is ready=false, never an error)", err)
	}
	return resp.GetReady().GetValue(), strings.Join(header.Get(NotReadyHeader), " ")
}

// TestReadyzFollowsProviders: over real sockets, a driver whose mounted
// volumes use providers "up" and "down" is ready while both answer; once
// "down" is gone (no socket at all), /readyz answers 503 naming it (and
// not "up"), Probe answers ready=false with the reason naming it, and the
// metric's view says down; unpublishing its volume makes the driver ready
// again. A driver started afresh on the same node while no provider runs is
// never ready.
func TestReadyzFollowsProviders(t *testing.T) {
	n := newSocketNode(t, Config{ProviderHealthInterval: 20 * time.Millisecond}, "up", "down")
	up, down := &gatedProvider{}, &gatedProvider{}
	stopUp := serveGated(t, n.sockets, "up", up)
	stopDown := serveGated(t, n.sockets, "down", down)
	id, srv := servedSocketNode(t, n.srv.d, socketDir(t))

	poll.UntilTrue(t, "/readyz ok without volumes", func() bool { code, _ := get(t, srv, "/readyz"); return code == http.StatusOK })
	if err := n.publish(t.Context(), "up", "u"); err != nil {
		t.Fatal(err)
	}
	if err := n.publish(t.Context(), "down", "d"); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, "both providers checked", func() bool { return len(n.srv.d.ProviderHealth()) == 2 })
	if code, body := get(t, srv, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with both providers answering: %d %q", code, body)
	}
	if ready, why := probe(t, id); !ready {
		t.Fatalf("Probe with both providers answering: not ready (%s)", why)
	}

	stopDown()
	if err := os.Remove(filepath.Join(n.sockets, "down.sock")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	poll.UntilTrue(t, "/readyz not ready", func() bool { code, _ := get(t, srv, "/readyz"); return code == http.StatusServiceUnavailable })
	if _, body := get(t, srv, "/readyz"); !strings.Contains(body, `provider "down"`) || strings.Contains(body, `provider "up"`) ||
		strings.Count(body, "\n") != 1 {
		t.Fatalf("/readyz body %q, want one line naming provider down only", body)
	}
	if ready, why := probe(t, id); ready || !strings.Contains(why, `provider "down"`) {
		t.Fatalf("Probe while down is gone: ready %v (%q), want not ready naming it", ready, why)
	}
	if got, want := n.srv.d.ProviderHealth(), map[string]bool{"up": true, "down": false}; !maps.Equal(got, want) {
		t.Fatalf("provider health %v, want %v", got, want)
	}

	if err := n.unpublish(t.Context(), "d"); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, "/readyz ok once no volume uses the provider that is gone", func() bool {
		code, _ := get(t, srv, "/readyz")
		return code == http.StatusOK && maps.Equal(n.srv.d.ProviderHealth(), map[string]bool{"up": true})
	})

	// A fresh driver on the node, no provider running: never ready.
	stopUp()
	freshDriverNotReady(t, n, "up")
}

// freshDriverNotReady starts a second driver on n's node, whose mounted
// volumes use provider, once provider's socket is gone: its first check
// finds it, and /readyz and Probe name it.
func freshDriverNotReady(t *testing.T, n *socketNode, provider string) {
	t.Helper()
	if err := os.Remove(filepath.Join(n.sockets, provider+".sock")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	d2 := n.newDriver(t, Config{ProviderHealthInterval: time.Hour})
	id2, srv2 := servedSocketNode(t, d2, socketDir(t))
	poll.UntilTrue(t, "the first round of the fresh driver", func() bool { return len(d2.ProviderHealth()) == 1 })
	name := `provider "` + provider + `"`
	if code, body := get(t, srv2, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, name) {
		t.Fatalf("/readyz of a fresh driver without provider sockets: %d %q, want 503 naming %s", code, body, name)
	}
	if ready, why := probe(t, id2); ready || !strings.Contains(why, name) {
		t.Fatalf("Probe of a fresh driver without provider sockets: ready %v (%q), want not ready naming %s", ready, why, name)
	}
}
