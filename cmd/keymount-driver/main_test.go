package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/tests/poll"
)

func TestParseFlagsDefaults(t *testing.T) {
	cfg := mustParseFlags(t, nil)
	if cfg.driver.DriverName != "secrets-store.csi.k8s.io" || cfg.driver.ProviderDir != "/var/run/secrets-store-csi-providers" ||
		cfg.additionalDirs != "/etc/kubernetes/secrets-store-csi-providers" || cfg.providerTimeout != 60*time.Second {
		t.Fatalf("defaults = %+v", cfg)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no classes", []string{"--state-dir=" + dir}, "--class-path"},
		{"sync without cluster", []string{"--state-dir=" + dir, "--class-path=" + dir, "--sync-secrets"}, "--sync-secrets needs an API server"},
		{"relative state dir", []string{"--state-dir=rel", "--class-path=" + dir}, "state dir"},
		{"relative provider dir", []string{"--state-dir=" + dir, "--class-path=" + dir, "--provider-dir=rel"}, "provider directory \"rel\""},
		{"bad endpoint", []string{"--state-dir=" + dir, "--class-path=" + dir, "--endpoint=tcp://x"}, "--endpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParseFlags(t, tc.args)
			err := run(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	dir := sockettest.Dir(t)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := mustParseFlags(t, []string{
		"--state-dir=" + dir, "--class-path=" + dir, "--provider-dir=" + dir,
		"--endpoint=unix://" + filepath.Join(dir, "csi.sock"), "--metrics-addr=",
	})
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg) }()
	sock := filepath.Join(dir, "csi.sock")
	if err := poll.Wait(t.Context(), time.Minute, func(context.Context) (bool, error) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return false, nil //nolint:nilerr // not serving yet
		}
		_ = c.Close()
		return true, nil
	}); err != nil {
		t.Fatalf("the driver never served %s: %v", sock, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run() after cancel = %v, want nil", err)
	}
}

// TestAPIRateLimits: the API client's rate limits come from the flags, with
// defaults far above client-go's 5 a second and 10 at once.
func TestAPIRateLimits(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	const kc = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\n" +
		"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {token: x}}]\n"
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		qps   float32
		burst int
	}{
		{nil, defaultKubeQPS, defaultKubeBurst},
		{[]string{"--kube-api-qps=7.5", "--kube-api-burst=30"}, 7.5, 30},
	} {
		cfg := mustParseFlags(t, append(tc.args, "--kubeconfig="+kubeconfig))
		rc, err := restConfig(cfg)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if rc.QPS != tc.qps || rc.Burst != tc.burst {
			t.Errorf("%q: QPS %v burst %d, want %v and %d", tc.args, rc.QPS, rc.Burst, tc.qps, tc.burst)
		}
	}
	if defaultKubeQPS < 50 || defaultKubeBurst < 200 {
		t.Errorf("default rate limits %d/%d do not fit a node where hundreds of pods start at once", defaultKubeQPS, defaultKubeBurst)
	}
	for _, bad := range []string{"--kube-api-qps=0", "--kube-api-burst=-1"} {
		cfg := mustParseFlags(t, []string{bad, "--kubeconfig=" + kubeconfig})
		if _, err := restConfig(cfg); err == nil || !strings.Contains(err.Error(), strings.SplitN(bad, "=", 2)[0]) {
			t.Errorf("%s: error %v, want one naming the flag", bad, err)
		}
	}
}

// TestServesWhileAPIServerUnreachable: a driver whose API server does not
// answer serves kubelet at once (an unpublish works), reports not ready
// (Probe and /readyz; /healthz says it is alive),
// and a publish that needs a class fails within its deadline naming why,
// instead of the driver exiting or never serving.
func TestServesWhileAPIServerUnreachable(t *testing.T) {
	dir := sockettest.Dir(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := "https://" + l.Addr().String()
	if err := l.Close(); err != nil { // nothing answers there any more
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	kc := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: '" + server + "', insecure-skip-tls-verify: true}}]\n" +
		"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {token: x}}]\n"
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	kubelet := filepath.Join(dir, "kubelet")
	sock := filepath.Join(dir, "csi.sock")
	metricsAddr := freeLoopbackAddr(t)
	cfg := mustParseFlags(t, []string{
		"--state-dir=" + filepath.Join(dir, "state"), "--provider-dir=" + dir, "--additional-provider-dirs=",
		"--kubelet-root-dir=" + kubelet, "--kubeconfig=" + kubeconfig, "--endpoint=unix://" + sock,
		"--metrics-addr=" + metricsAddr,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run() after cancel = %v, want nil", err)
		}
	}()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	probeCtx, probeCancel := context.WithTimeout(t.Context(), time.Minute)
	defer probeCancel()
	resp, err := csi.NewIdentityClient(conn).Probe(probeCtx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("Probe while the API server is unreachable: %v (the driver must serve)", err)
	}
	if resp.GetReady().GetValue() {
		t.Errorf("Probe: ready without an API server")
	}
	if code, _ := httpGet(t, metricsAddr, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz without an API server: %d, want 503", code)
	}
	if code, _ := httpGet(t, metricsAddr, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while waiting for the API server: %d, want 200 (alive)", code)
	}
	node := csi.NewNodeClient(conn)
	uid := "9b2f3c1e-0000-4000-8000-000000000001"
	target := filepath.Join(kubelet, "pods", uid, "volumes", "kubernetes.io~csi", "secrets", "mount")
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := node.NodeUnpublishVolume(t.Context(), &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-0123", TargetPath: target}); err != nil {
		t.Errorf("NodeUnpublishVolume of a volume the driver does not have: %v, want success", err)
	}
	pubCtx, pubCancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer pubCancel()
	_, err = node.NodePublishVolume(pubCtx, &csi.NodePublishVolumeRequest{
		VolumeId: "csi-0123", TargetPath: target, Readonly: true,
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
		VolumeContext: map[string]string{
			driver.AttrClass: "app", driver.AttrPodName: "app", driver.AttrPodNamespace: "default",
			driver.AttrPodUID: uid, driver.AttrServiceAccount: "default", driver.AttrEphemeral: "true",
		},
	})
	if err == nil {
		t.Fatal("NodePublishVolume succeeded without an API server to read the class from")
	}
	// Unavailable: kubelet retries; the message says what was not reached.
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "secretproviderclass default/app") {
		t.Errorf("NodePublishVolume: %v, want Unavailable naming the class it could not read", err)
	}
}

func TestSyncSecretsFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want syncMode
	}{
		{nil, syncAuto},
		{[]string{"--sync-secrets"}, syncOn},
		{[]string{"--sync-secrets=true"}, syncOn},
		{[]string{"--sync-secrets=false"}, syncOff},
		{[]string{"--sync-secrets=auto"}, syncAuto},
		{[]string{"--sync-secrets=AUTO"}, syncAuto},
	} {
		if got := mustParseFlags(t, tc.args).syncSecrets; got != tc.want {
			t.Errorf("%v: sync-secrets %q, want %q", tc.args, got, tc.want)
		}
	}
	var m syncMode
	if err := m.Set("maybe"); err == nil || !strings.Contains(err.Error(), "true, false or auto") {
		t.Errorf("Set(maybe) = %v, want an error naming the values", err)
	}
}
