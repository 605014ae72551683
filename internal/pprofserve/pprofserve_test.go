package pprofserve

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestServeOnLoopback(t *testing.T) {
	stop, addr, err := Serve(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("listening on %q (%v), want 127.0.0.1 only", addr, err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile") {
		t.Errorf("heap profile: %s %.200s", resp.Status, body)
	}
	if _, _, err := Serve(t.Context(), mustPort(t, addr)); err == nil || !strings.Contains(err.Error(), "--pprof-port") {
		t.Errorf("a second server on the same port: %v, want an error naming --pprof-port", err)
	}
}

func mustPort(t *testing.T, addr string) int {
	t.Helper()
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a.Port
}
