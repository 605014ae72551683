package hostile_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/internal/killpoint"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/tests/harness"
	"github.com/keymount/keymount/tests/poll"
)

// built is the driver binary, built once per test binary.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// driverBinary builds cmd/keymount-driver on first use.
func driverBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "keymount-hostile-bin"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "keymount-driver")
		out, err := exec.Command("go", "build", "-o", built.path, "github.com/keymount/keymount/cmd/keymount-driver").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build ./cmd/keymount-driver: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// builtKill is the driver binary built with the tag killpoints
// (internal/killpoint): it dies by SIGKILL at the step KEYMOUNT_KILLPOINT
// names.
var builtKill struct {
	once sync.Once
	path string
	err  error
}

// killpointBinary builds cmd/keymount-driver with kill points on first use.
func killpointBinary(t *testing.T) string {
	t.Helper()
	driverBinary(t) // makes built.dir
	builtKill.once.Do(func() {
		builtKill.path = filepath.Join(built.dir, "keymount-driver-killpoints")
		out, err := exec.Command("go", "build", "-tags", "killpoints", "-o", builtKill.path,
			"github.com/keymount/keymount/cmd/keymount-driver").CombinedOutput()
		if err != nil {
			builtKill.err = fmt.Errorf("go build -tags killpoints ./cmd/keymount-driver: %w\n%s", err, out)
		}
	})
	if builtKill.err != nil {
		t.Fatal(builtKill.err)
	}
	return builtKill.path
}

// removeBuilt removes the binaries after the last test.
func removeBuilt() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}

// binNode is a node running the driver binary, with the scripted provider
// in the test process. Its directories live in one short temporary
// directory (unix socket paths are limited to 108 bytes).
type binNode struct {
	dir, classDir, providerDir, stateDir, kubeletRoot, sock string

	// bin is the driver binary (driverBinary when empty); killpoint, when
	// set, is passed to it as KEYMOUNT_KILLPOINT.
	bin, killpoint string

	prov *scriptProvider
	drv  *proc
	conn *grpc.ClientConn
	node csi.NodeClient
}

// startBinNode makes the directories, writes className, serves the
// scripted provider and starts the driver binary. The test's cleanup kills
// the driver and unmounts and removes everything.
func startBinNode(t *testing.T) *binNode {
	t.Helper()
	return startBinNodeWith(t, "")
}

// startBinNodeWith is startBinNode running binary bin (driverBinary when
// empty).
func startBinNodeWith(t *testing.T, bin string) *binNode {
	t.Helper()
	dir, err := sockettest.MkdirTemp("kmb")
	if err != nil {
		t.Fatal(err)
	}
	b := &binNode{
		dir: dir, classDir: filepath.Join(dir, "classes"), providerDir: filepath.Join(dir, "providers"),
		stateDir: filepath.Join(dir, "state"), kubeletRoot: filepath.Join(dir, "kubelet"),
		sock: filepath.Join(dir, "csi.sock"), prov: &scriptProvider{}, bin: bin,
	}
	t.Cleanup(func() { b.cleanup(t) })
	for _, d := range []string{b.classDir, b.providerDir, b.stateDir, b.kubeletRoot} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	class := "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nmetadata:\n  name: " + className +
		"\nspec:\n  provider: " + providerName + "\n  parameters:\n    test: binary\n"
	if err := os.WriteFile(filepath.Join(b.classDir, className+".yaml"), []byte(class), 0o600); err != nil {
		t.Fatal(err)
	}
	serveProvider(t, b.providerDir, providerName, b.prov)
	b.startDriver(t)
	return b
}

// driverArgs are the flags of the driver binary on this node.
func (b *binNode) driverArgs() []string {
	return []string{
		"--endpoint=unix://" + b.sock, "--class-path=" + b.classDir, "--provider-dir=" + b.providerDir,
		"--additional-provider-dirs=", "--state-dir=" + b.stateDir, "--kubelet-root-dir=" + b.kubeletRoot,
		// Every republish refreshes: the crash tests republish to write.
		"--enable-secret-rotation", "--rotation-poll-interval=0s",
		"--node-id=hostile-node", "-v=2", "--metrics-addr=",
	}
}

// driverCmd is the driver binary with this node's flags and an environment
// without an in-cluster API server.
func (b *binNode) driverCmd(t *testing.T) *exec.Cmd {
	bin := b.bin
	if bin == "" {
		bin = driverBinary(t)
	}
	cmd := exec.Command(bin, b.driverArgs()...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBERNETES_SERVICE_") && !strings.HasPrefix(kv, killpoint.EnvVar+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if b.killpoint != "" {
		cmd.Env = append(cmd.Env, killpoint.EnvVar+"="+b.killpoint)
	}
	return cmd
}

// startDriver starts the driver binary and waits until Probe says ready.
func (b *binNode) startDriver(t *testing.T) {
	t.Helper()
	p, err := startProc(b.driverCmd(t))
	if err != nil {
		t.Fatalf("start driver: %v", err)
	}
	b.drv = p
	if b.conn != nil {
		_ = b.conn.Close()
	}
	// A short reconnect backoff: the socket appears a moment after start.
	b.conn, err = grpc.NewClient("unix://"+b.sock,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: 5 * time.Millisecond, Multiplier: 1.5, MaxDelay: 50 * time.Millisecond,
		}}))
	if err != nil {
		t.Fatal(err)
	}
	b.node = csi.NewNodeClient(b.conn)
	b.waitReady(t, csi.NewIdentityClient(b.conn))
}

// waitReady waits until the driver answers Probe with ready, failing when
// it exits first or is not ready within waitLimit.
func (b *binNode) waitReady(t *testing.T, id csi.IdentityClient) {
	t.Helper()
	err := poll.Wait(t.Context(), waitLimit, func(ctx context.Context) (bool, error) {
		resp, err := id.Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
		if err == nil && resp.GetReady().GetValue() {
			return true, nil
		}
		select {
		case <-b.drv.exited:
			t.Fatalf("driver exited before it was ready: %v\n%s", b.drv.err, b.drv.out)
		default:
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("driver not ready: %v\n%s", err, b.drv.out)
	}
}

func (b *binNode) cleanup(t *testing.T) {
	if b.drv != nil {
		b.drv.kill(t)
		if t.Failed() {
			t.Logf("log of the last driver run:\n%s", b.drv.out)
		}
	}
	if b.conn != nil {
		_ = b.conn.Close()
	}
	if _, err := harness.UnmountAll(b.dir); err != nil {
		t.Errorf("unmount: %v", err)
		return
	}
	if err := os.RemoveAll(b.dir); err != nil {
		t.Errorf("remove %s: %v", b.dir, err)
	}
}

// target is kubelet's target path of a pod's CSI volume on this node.
func (b *binNode) target(podUID, volume string) string {
	return filepath.Join(b.kubeletRoot, "pods", podUID, "volumes", "kubernetes.io~csi", volume, "mount")
}

// publishRequest is kubelet's NodePublishVolume for an inline read-only
// volume of className, as harness.PublishRequest sends it.
func (b *binNode) publishRequest(podUID, volume string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{
		VolumeId:   harness.VolumeID(podUID, volume),
		TargetPath: b.target(podUID, volume),
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
		Readonly: true,
		VolumeContext: map[string]string{
			driver.AttrClass:          className,
			driver.AttrPodName:        "app-" + podUID[:8],
			driver.AttrPodNamespace:   "default",
			driver.AttrPodUID:         podUID,
			driver.AttrServiceAccount: "default",
			driver.AttrEphemeral:      "true",
		},
	}
}

// TestSecondDriverBinaryOnLiveSocketFails: a second driver started on the
// socket of a live one exits with an error and leaves the socket to the
// first, which keeps serving.
func TestSecondDriverBinaryOnLiveSocketFails(t *testing.T) {
	b := startBinNode(t)
	before, err := os.Lstat(b.sock)
	if err != nil {
		t.Fatal(err)
	}
	second, err := startProc(b.driverCmd(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.kill(t) })
	second.wait(t)
	if second.err == nil {
		t.Fatalf("second driver on a live socket exited cleanly, want a failure\n%s", second.out)
	}
	if out := second.out.String(); !strings.Contains(out, "socket in use") {
		t.Errorf("second driver's log does not say the socket is in use:\n%s", out)
	}
	after, err := os.Lstat(b.sock)
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("the first driver's socket was replaced or removed (lstat: %v)", err)
	}
	b.waitReady(t, csi.NewIdentityClient(b.conn))
}
