package registration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/tests/poll"
)

// kubeletGetInfo does what kubelet's plugin watcher does with a new socket.
func kubeletGetInfo(t *testing.T, socket string) *registerapi.PluginInfo {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	c := registerapi.NewRegistrationClient(conn)
	info, err := c.GetInfo(t.Context(), &registerapi.InfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if _, err := c.NotifyRegistrationStatus(t.Context(), &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatalf("NotifyRegistrationStatus: %v", err)
	}
	return info
}

func socketAt(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// TestServeRegistersAndComesBack: kubelet learns the driver's name, CSI
// endpoint and versions; when the socket disappears (kubelet restarted and
// cleaned its registry) it is created again; Serve removes it when it stops.
func TestServeRegistersAndComesBack(t *testing.T) {
	cfg := Config{
		DriverName:    "secrets-store.csi.k8s.io",
		Endpoint:      "/var/lib/kubelet/plugins/csi-secrets-store/csi.sock",
		Dir:           filepath.Join(sockettest.Dir(t), "plugins_registry"),
		CheckInterval: 10 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, nil) }()
	sock := cfg.SocketPath()
	if filepath.Base(sock) != "secrets-store.csi.k8s.io-reg.sock" {
		t.Fatalf("socket name %s is not kubelet's <driver>-reg.sock", sock)
	}
	poll.UntilTrue(t, "the registration socket", func() bool { return socketAt(sock) })

	info := kubeletGetInfo(t, sock)
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != cfg.DriverName || info.GetEndpoint() != cfg.Endpoint ||
		len(info.GetSupportedVersions()) == 0 {
		t.Fatalf("GetInfo = %+v", info)
	}

	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, "the socket to be created again", func() bool { return socketAt(sock) })
	if got := kubeletGetInfo(t, sock); got.GetName() != cfg.DriverName {
		t.Fatalf("GetInfo after re-creation = %+v", got)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind after Serve stopped: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{Endpoint: "/e.sock", Dir: "/d"},
		{DriverName: "d", Endpoint: "relative.sock", Dir: "/d"},
		{DriverName: "d", Endpoint: "/e.sock", Dir: "relative"},
	} {
		if err := Serve(t.Context(), c, nil); err == nil {
			t.Errorf("Serve(%+v) accepted an invalid config", c)
		}
	}
}
