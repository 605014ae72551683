package driver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/registration"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/tests/poll"
)

// healthDriver is a driver that is not serving yet, and a func that starts
// serving it on a real unix socket until the test ends.
func healthDriver(t *testing.T) (d *Driver, run func()) {
	t.Helper()
	base := sockettest.Dir(t)
	vols, err := volume.NewManager(filepath.Join(base, "state"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	d, err = New(Config{NodeID: "n", Endpoint: "unix://" + filepath.Join(base, "csi.sock"), ProviderDir: base, KubeletRootDir: base},
		Deps{Classes: &class.FileResolver{}, Providers: funcProvider(nil), Volumes: vols})
	if err != nil {
		t.Fatal(err)
	}
	return d, func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("driver stopped with %v", err)
			}
		})
	}
}

// get asks srv for path and returns the status code and body.
func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// wantHealth fails the test unless /healthz answers code with a body for
// which ok holds.
func wantHealth(t *testing.T, srv *httptest.Server, what string, code int, ok func(body string) bool) {
	t.Helper()
	if got, body := get(t, srv, "/healthz"); got != code || !ok(body) {
		t.Fatalf("%s: /healthz = %d %q, want %d", what, got, body, code)
	}
}

func bodyIs(want string) func(string) bool { return func(body string) bool { return body == want } }

// TestHealthWithoutRegistration: with no checks, /healthz answers whether
// the CSI socket is served, as it always has.
func TestHealthWithoutRegistration(t *testing.T) {
	d, run := healthDriver(t)
	srv := httptest.NewServer(d.HealthHandler())
	t.Cleanup(srv.Close)
	wantHealth(t, srv, "before serving", http.StatusServiceUnavailable, bodyIs("not ready\n"))
	run()
	poll.UntilTrue(t, "/healthz ok", func() bool { code, _ := get(t, srv, "/healthz"); return code == http.StatusOK })
	wantHealth(t, srv, "serving", http.StatusOK, bodyIs("ok\n"))
}

// TestHealthCheckFails: a failing check answers 503 with its error on one
// line; the CSI socket not served still answers "not ready" first.
func TestHealthCheckFails(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	check := func() error {
		if failing.Load() {
			return errors.New("first line\nsecond line")
		}
		return nil
	}
	d, run := healthDriver(t)
	srv := httptest.NewServer(d.HealthHandler(func() error { return nil }, check))
	t.Cleanup(srv.Close)
	wantHealth(t, srv, "failing check, not serving", http.StatusServiceUnavailable, bodyIs("not ready\n"))
	run()
	poll.UntilTrue(t, "/healthz to report the check", func() bool { _, body := get(t, srv, "/healthz"); return body != "not ready\n" })
	wantHealth(t, srv, "failing check", http.StatusServiceUnavailable, bodyIs("first line second line\n"))
	failing.Store(false)
	wantHealth(t, srv, "passing checks", http.StatusOK, bodyIs("ok\n"))
}

// TestHealthRegistration: with the registration's Status as a check,
// /healthz follows kubelet's answers and the registration socket, on a real
// socket with kubelet's real gRPC calls.
func TestHealthRegistration(t *testing.T) {
	d, run := healthDriver(t)
	clk := clocktesting.NewFakeClock(time.Now())
	cfg := registration.Config{
		DriverName: DefaultDriverName, Endpoint: "/var/lib/kubelet/plugins/csi-secrets-store/csi.sock",
		Dir: filepath.Join(sockettest.Dir(t), "plugins_registry"), CheckInterval: time.Second, Clock: clk,
	}
	sock := cfg.SocketPath()
	status := &registration.Status{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- registration.Serve(ctx, cfg, status) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("registration.Serve: %v", err)
		}
	})
	srv := httptest.NewServer(d.HealthHandler(status.Check))
	t.Cleanup(srv.Close)
	run()
	// Before kubelet answers: healthy.
	poll.UntilTrue(t, "/healthz ok before kubelet answers", func() bool { code, _ := get(t, srv, "/healthz"); return code == http.StatusOK })

	kubeletAnswers(t, sock, false, "RegisterPlugin error -- plugin version not supported")
	wantHealth(t, srv, "kubelet refused", http.StatusServiceUnavailable, func(body string) bool {
		return strings.Contains(body, sock) && strings.Contains(body, "plugin version not supported") &&
			strings.Count(body, "\n") == 1 && strings.HasSuffix(body, "\n")
	})

	kubeletAnswers(t, sock, true, "")
	wantHealth(t, srv, "kubelet registered", http.StatusOK, bodyIs("ok\n"))

	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	wantHealth(t, srv, "socket removed", http.StatusServiceUnavailable, func(body string) bool {
		return strings.Contains(body, sock) && strings.Contains(body, "missing")
	})
	poll.UntilTrue(t, "the socket check's ticker", func() bool { return clk.HasWaiters() })
	clk.Step(cfg.CheckInterval)
	poll.UntilTrue(t, "/healthz ok once the socket is back", func() bool { code, _ := get(t, srv, "/healthz"); return code == http.StatusOK })
}

// kubeletAnswers sends kubelet's answer to the registration socket.
func kubeletAnswers(t *testing.T, socket string, registered bool, kubeletErr string) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	st := &registerapi.RegistrationStatus{PluginRegistered: registered, Error: kubeletErr}
	if _, err := registerapi.NewRegistrationClient(conn).NotifyRegistrationStatus(t.Context(), st, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("NotifyRegistrationStatus: %v", err)
	}
}
