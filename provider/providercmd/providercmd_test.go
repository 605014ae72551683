package providercmd

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/keymount/keymount/internal/klogtest"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/tests/poll"
)

func TestRunReturnsRunsError(t *testing.T) {
	want := errors.New("boom")
	var live bool
	err := Run("keymount-provider-test", func(ctx context.Context) error {
		live = ctx.Err() == nil
		return want
	})
	if !errors.Is(err, want) || !live {
		t.Errorf("Run: %v (context live: %v), want %v from a live context", err, live, want)
	}
	if err := Run("keymount-provider-test", func(context.Context) error { return nil }); err != nil {
		t.Errorf("Run of a clean stop: %v", err)
	}
}

// TestServeMetrics: /metrics is h, other paths are not found, and a bad
// address is an error naming the flag.
func TestServeMetrics(t *testing.T) {
	buf := klogtest.Capture(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "m_total 1\n") })
	stop, err := ServeMetrics(t.Context(), "127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	klog.Flush()
	_, addr, ok := strings.Cut(buf.String(), `addr="`)
	addr, _, _ = strings.Cut(addr, `"`)
	if !ok || addr == "" {
		t.Fatalf("no address logged: %q", buf.String())
	}
	for path, want := range map[string]int{"/metrics": http.StatusOK, "/other": http.StatusNotFound} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != want || (want == http.StatusOK && string(body) != "m_total 1\n") {
			t.Errorf("GET %s: %s %q, want %d", path, resp.Status, body, want)
		}
	}
	if _, err := ServeMetrics(t.Context(), "127.0.0.1:bad", h); err == nil || !strings.Contains(err.Error(), "--metrics-addr 127.0.0.1:bad") {
		t.Errorf("a bad address: %v, want an error naming --metrics-addr", err)
	}
}

type nopProvider struct{}

func (nopProvider) Mount(context.Context, *server.MountRequest) (*server.MountResult, error) {
	return &server.MountResult{}, nil
}

func TestServe(t *testing.T) {
	buf := klogtest.Capture(t)
	cfg := server.Config{Name: "t", Version: "v9", SocketDir: sockettest.Dir(t)}
	socket := filepath.Join(cfg.SocketDir, "t.sock")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, nopProvider{}, "extra", "x") }()
	err := poll.Wait(t.Context(), time.Minute, func(context.Context) (bool, error) {
		_, err := os.Stat(socket)
		return err == nil, nil
	})
	if err != nil {
		cancel()
		t.Fatalf("socket %s never appeared: %v (Serve: %v)", socket, err, <-done)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
	klog.Flush()
	out := buf.String()
	for _, want := range []string{`"serving" provider="t" socket="` + socket + `" extra="x" version="v9"`, `"stopped" provider="t"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if err := Serve(t.Context(), server.Config{Name: "bad name"}, nopProvider{}); err == nil {
		t.Error("Serve of an invalid provider name: no error")
	}
}
