package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	mount "k8s.io/mount-utils"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/local"
	"github.com/keymount/keymount/provider/server"
)

// TestMetricsEndpoint: the driver started with --metrics-addr serves
// /metrics with upstream's names counting the publishes and unpublishes
// made through its CSI socket, keymount's provider call histogram counting
// the provider calls and the provider's health, and /healthz and /readyz.
func TestMetricsEndpoint(t *testing.T) {
	addr, conn, kubelet := startMetricsDriver(t)
	if code, _ := httpGet(t, addr, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz of a serving driver without a cluster: %d, want 200", code)
	}
	if code, _ := httpGet(t, addr, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d, want 200", code)
	}

	node := csi.NewNodeClient(conn)
	uid := "9b2f3c1e-0000-4000-8000-000000000002"
	req := &csi.NodePublishVolumeRequest{
		VolumeId: "csi-metrics", Readonly: true,
		TargetPath: filepath.Join(kubelet, "pods", uid, "volumes", "kubernetes.io~csi", "secrets", "mount"),
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
		VolumeContext: map[string]string{
			driver.AttrClass: "app", driver.AttrPodName: "app", driver.AttrPodNamespace: "default",
			driver.AttrPodUID: uid, driver.AttrServiceAccount: "default", driver.AttrEphemeral: "true",
		},
	}
	if err := os.MkdirAll(filepath.Dir(req.TargetPath), 0o750); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a first publish and a republish (rotation off: no provider call)
		if _, err := node.NodePublishVolume(t.Context(), req); err != nil {
			t.Fatalf("NodePublishVolume: %v", err)
		}
	}
	// The provider answered the Mount: healthy, before any background round saw its volume.
	if _, body := httpGet(t, addr, "/metrics"); scrape(t, body)[`keymount_provider_healthy{provider="local"}`] != 1 {
		t.Errorf("keymount_provider_healthy of the provider that just mounted a volume is not 1")
	}
	bad := &csi.NodePublishVolumeRequest{VolumeId: "csi-bad", TargetPath: req.TargetPath}
	if _, err := node.NodePublishVolume(t.Context(), bad); err == nil {
		t.Fatal("NodePublishVolume without a capability succeeded")
	}
	if _, err := node.NodeUnpublishVolume(t.Context(), &csi.NodeUnpublishVolumeRequest{VolumeId: req.VolumeId, TargetPath: req.TargetPath}); err != nil {
		t.Fatalf("NodeUnpublishVolume: %v", err)
	}

	code, body := httpGet(t, addr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	got := scrape(t, body)
	osType := runtime.GOOS
	for _, tc := range []struct {
		series string
		want   float64
	}{
		{`node_publish_total{os_type="` + osType + `",provider="local"}`, 2},
		{`node_publish_error_total{error_type="FailedToMount",grpc_code="InvalidArgument",os_type="` + osType + `",provider=""}`, 1},
		{`node_unpublish_total{os_type="` + osType + `"}`, 1},
		{`node_unpublish_error_total{os_type="` + osType + `"}`, 0},
		{`keymount_provider_call_duration_seconds_count{code="OK",provider="local"}`, 1},
		// The local provider has no unpublish extension: the unpublish
		// succeeded anyway, its call counted as Unimplemented.
		{`keymount_provider_unpublish_calls_total{code="Unimplemented",provider="local"}`, 1},
		{`keymount_node_publish_duration_seconds_count`, 3},
		{`keymount_api_write_queue_depth`, 0},
	} {
		if v, ok := got[tc.series]; !ok || v != tc.want {
			t.Errorf("%s = %v (present: %v), want %v", tc.series, v, ok, tc.want)
		}
	}
	// The republish was decided on; the first publish needs no decision.
	if n := sumOf(got, "keymount_refresh_decisions_total"); n != 1 {
		t.Errorf("%v refresh decisions, want 1 (the republish)", n)
	}
	if _, ok := got["process_resident_memory_bytes"]; !ok {
		t.Error("no process metrics")
	}
}

// TestMetricsAddrOff: an empty --metrics-addr serves nothing.
func TestMetricsAddrOff(t *testing.T) {
	cfg := mustParseFlags(t, nil)
	if cfg.metricsAddr != ":8095" {
		t.Errorf("default --metrics-addr %q, want upstream's :8095", cfg.metricsAddr)
	}
	cfg = mustParseFlags(t, []string{"--metrics-addr="})
	deps := driver.Deps{}
	if m := newMetrics(cfg, &deps, func(string) bool { return true }); m != nil || deps.Metrics != nil {
		t.Errorf("--metrics-addr= made metrics %v", m)
	}
	stop, err := serveEndpoints(t.Context(), cfg, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop()
}

// startMetricsDriver runs the driver in-process with --metrics-addr on a
// free 127.0.0.1 port, classes from a file (class "app" of the local
// provider, served in-process) and no API server, until the test ends. It
// returns the metrics address, a connection to the CSI socket and kubelet's
// root directory.
func startMetricsDriver(t *testing.T) (string, *grpc.ClientConn, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("the driver mounts tmpfs: run as root (euid %d)", os.Geteuid())
	}
	dir := sockettest.Dir(t)
	kubelet, objects, providers := filepath.Join(dir, "kubelet"), filepath.Join(dir, "objects"), filepath.Join(dir, "providers")
	for _, d := range []string{kubelet, objects, providers} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { unmountUnder(t, dir) })
	if err := os.WriteFile(filepath.Join(objects, "db-password"), []byte("pw"), 0o600); err != nil {
		t.Fatal(err)
	}
	classFile := filepath.Join(dir, "spc.yaml")
	spc := "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nmetadata:\n  name: app\n" +
		"spec:\n  provider: local\n  parameters:\n    objects: |\n      - objectName: db-password\n"
	if err := os.WriteFile(classFile, []byte(spc), 0o600); err != nil {
		t.Fatal(err)
	}
	serveLocalProvider(t, objects, providers)

	addr := freeLoopbackAddr(t)
	sock := filepath.Join(dir, "csi.sock")
	cfg := mustParseFlags(t, []string{
		"--state-dir=" + filepath.Join(dir, "state"), "--class-path=" + classFile, "--provider-dir=" + providers,
		"--additional-provider-dirs=", "--kubelet-root-dir=" + kubelet, "--endpoint=unix://" + sock,
		"--metrics-addr=" + addr,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run() after cancel = %v, want nil", err)
		}
	})
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	waitCtx, waitCancel := context.WithTimeout(t.Context(), time.Minute)
	defer waitCancel()
	if _, err := csi.NewIdentityClient(conn).Probe(waitCtx, &csi.ProbeRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("the driver never served: %v", err)
	}
	return addr, conn, kubelet
}

// serveLocalProvider serves the local provider on root as "local" in dir
// until the test ends.
func serveLocalProvider(t *testing.T, root, dir string) {
	t.Helper()
	p, err := local.New(root)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Name: "local", Version: "test", SocketDir: dir}, p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("local provider: %v", err)
		}
	})
}

// freeLoopbackAddr is a 127.0.0.1 address with a port free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func httpGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// scrape reads Prometheus' text format: every series, as /metrics
// prints it (name{labels}), and its value.
func scrape(t *testing.T, body string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("/metrics line %q: not a series and a value", line)
		}
		out[line[:i]] = v
	}
	return out
}

// sumOf adds the values of every series of name.
func sumOf(series map[string]float64, name string) float64 {
	var sum float64
	for s, v := range series {
		if s == name || strings.HasPrefix(s, name+"{") {
			sum += v
		}
	}
	return sum
}

// unmountUnder unmounts whatever a failed test left mounted under dir.
func unmountUnder(t *testing.T, dir string) {
	mps, err := mount.New("").List()
	if err != nil {
		t.Error(err)
		return
	}
	for i := len(mps) - 1; i >= 0; i-- {
		if rel, err := filepath.Rel(dir, mps[i].Path); err == nil && filepath.IsLocal(rel) {
			if err := mount.New("").Unmount(mps[i].Path); err != nil {
				t.Errorf("unmount %s: %v", mps[i].Path, err)
			}
		}
	}
}
