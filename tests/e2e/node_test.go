package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/tests/poll"
)

// readyTimeout bounds a driver's start: it syncs its caches with the API
// server before it opens its socket.
const readyTimeout = 90 * time.Second

// logTailLines is how much of each log a failed test prints.
const logTailLines = 60

// nodeOptions choose how a node's driver runs.
type nodeOptions struct {
	// noSync runs the driver without --sync-secrets, as noSyncUser, whose
	// only role is the base ClusterRole keymount.
	noSync bool
	// upstreamFlags starts the driver with the flags the upstream driver's
	// v1.6 manifests and chart render, under upstream's names.
	upstreamFlags bool
	// driverFlags are added to the driver's arguments; a flag given
	// again overrides the default's value.
	driverFlags []string
}

// node is one emulated node: a directory standing in for the host, the
// local provider and the driver running as processes, and the CSI client
// kubelet would use.
type node struct {
	s    *suite
	name string
	dir  string

	kubeletRoot      string // kubelet's --root-dir
	providerRoot     string // the local provider's --root: its objects
	providerDir      string // the driver's --provider-dir
	extraProviderDir string // the driver's --additional-provider-dirs
	stateDir         string
	socket           string
	metricsAddr      string // the driver's --metrics-addr, on 127.0.0.1
	driverLog        string
	providerLog      string

	driverArgs []string
	driver     *process
	provider   *process
	conn       *grpc.ClientConn
	csi        csi.NodeClient

	mu        sync.Mutex
	forbidden []secretValue
}

// nodeRegistry remembers every node the package started.
type nodeRegistry struct {
	mu           sync.Mutex
	names, paths []string
}

func (r *nodeRegistry) add(name, dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names = append(r.names, name)
	r.paths = append(r.paths, dir)
}

func (r *nodeRegistry) nodeNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.names)
}

func (r *nodeRegistry) dirs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.paths)
}

var allNodes nodeRegistry

// startNode starts the local provider and the driver of a new node and
// registers a cleanup that stops them, checks their logs for forbidden
// values, unmounts whatever is left and removes the node's directory. The
// logs go to the suite's log directory, which TestMain scans at the end.
func startNode(t *testing.T, opts nodeOptions) *node {
	t.Helper()
	s := env(t)
	if os.Geteuid() != 0 {
		t.Fatalf("the end-to-end suite mounts tmpfs and must run as root (euid %d)", os.Geteuid())
	}
	// A short directory: unix socket paths are limited to 108 bytes.
	dir, err := sockettest.MkdirTemp("kme")
	if err != nil {
		t.Fatal(err)
	}
	name := nodeName(t)
	metricsPort, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	logDir, err := suiteLogs.dir(name)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{
		s:                s,
		name:             name,
		dir:              dir,
		kubeletRoot:      filepath.Join(dir, "kubelet"),
		providerRoot:     filepath.Join(dir, "objects"),
		providerDir:      filepath.Join(dir, "providers"),
		extraProviderDir: filepath.Join(dir, "etc-providers"),
		stateDir:         filepath.Join(dir, "state"),
		socket:           filepath.Join(dir, "csi.sock"),
		metricsAddr:      net.JoinHostPort("127.0.0.1", strconv.Itoa(metricsPort)),
		driverLog:        filepath.Join(logDir, "driver.log"),
		providerLog:      filepath.Join(logDir, "provider.log"),
	}
	allNodes.add(n.name, n.dir)
	t.Cleanup(func() { n.cleanup(t) })
	for _, d := range []string{n.kubeletRoot, n.providerRoot, n.providerDir, n.extraProviderDir, n.stateDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("node %s in %s", n.name, n.dir)

	n.provider, err = startProcess("keymount-provider-local", n.providerLog, filepath.Join(s.bin, "keymount-provider-local"),
		"--root="+n.providerRoot, "--provider-dir="+n.providerDir, "--name=local", logVerbosity)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitForSocket(t.Context(), filepath.Join(n.providerDir, "local.sock"), n.provider); err != nil {
		t.Fatalf("the local provider did not start: %v\n%s", err, tail(n.providerLog, logTailLines))
	}

	kubeconfig := s.driverKubeconfig
	if opts.noSync {
		kubeconfig = s.noSyncKubeconfig
	}
	if opts.upstreamFlags {
		n.driverArgs = upstreamDriverArgs(n, kubeconfig)
	} else {
		n.driverArgs = keymountDriverArgs(n, kubeconfig)
	}
	if !opts.noSync && !opts.upstreamFlags {
		// With upstream's flags sync is auto, as upstream: on, since this
		// driver's RBAC has the secret-sync rules.
		n.driverArgs = append(n.driverArgs, "--sync-secrets")
	}
	n.driverArgs = append(n.driverArgs, opts.driverFlags...)
	n.startDriver(t)
	return n
}

// keymountDriverArgs are the driver's arguments under keymount's names.
func keymountDriverArgs(n *node, kubeconfig string) []string {
	return []string{
		"--endpoint=unix://" + n.socket,
		"--node-id=" + n.name,
		"--driver-name=" + driverName,
		"--provider-dir=" + n.providerDir,
		"--additional-provider-dirs=" + n.extraProviderDir,
		"--state-dir=" + n.stateDir,
		"--kubelet-root-dir=" + n.kubeletRoot,
		"--tmpfs-size=4Mi",
		"--kubeconfig=" + kubeconfig,
		"--metrics-addr=" + n.metricsAddr,
		// Every republish refreshes, also right after a failed one: the
		// tests change objects and republish at once. Not-due republishes
		// and the backoff of failures are tested apart (rotation_test.go).
		"--enable-secret-rotation", "--rotation-poll-interval=0s",
		"--rotation-backoff-initial=1ms", "--rotation-backoff-max=1ms",
		logVerbosity,
	}
}

// upstreamDriverArgs are the arguments of the upstream driver's v1.6
// DaemonSet (manifests and chart), with this node's paths, plus what a test
// node needs besides: its state and kubelet directories, a small tmpfs and
// the API server's credentials (in a cluster: the pod's own).
func upstreamDriverArgs(n *node, kubeconfig string) []string {
	return []string{
		"--endpoint=unix://" + n.socket,
		"--nodeid=" + n.name,
		"--provider-volume=" + n.providerDir,
		"--additional-provider-volume-paths=" + n.extraProviderDir,
		"--metrics-addr=" + n.metricsAddr, // upstream's :8095, on loopback
		"--enable-secret-rotation=false",
		"--rotation-poll-interval=2m",
		"--provider-health-check=false",
		"--provider-health-check-interval=2m",
		"--state-dir=" + n.stateDir,
		"--kubelet-root-dir=" + n.kubeletRoot,
		"--tmpfs-size=4Mi",
		"--kubeconfig=" + kubeconfig,
		logVerbosity,
	}
}

// nodeName is a node name made from the test's name and a random suffix,
// valid as a label value.
func nodeName(t *testing.T) string {
	base := strings.ToLower(strings.TrimPrefix(t.Name(), "Test"))
	base = regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(base, "-")
	base = strings.Trim(base, "-")
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	return base + "-" + randomHex(3)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// startDriver starts the driver and waits until it answers Probe ready.
func (n *node) startDriver(t *testing.T) {
	t.Helper()
	var err error
	n.driver, err = startProcess("keymount-driver", n.driverLog, filepath.Join(n.s.bin, "keymount-driver"), n.driverArgs...)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitForSocket(t.Context(), n.socket, n.driver); err != nil {
		t.Fatalf("the driver did not start: %v\n%s", err, tail(n.driverLog, logTailLines))
	}
	// Kubelet's connection: insecure, authority localhost.
	n.conn, err = grpc.NewClient("unix://"+n.socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	n.csi = csi.NewNodeClient(n.conn)
	id := csi.NewIdentityClient(n.conn)
	var last error
	err = poll.Wait(t.Context(), readyTimeout, func(ctx context.Context) (bool, error) {
		resp, err := id.Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
		if err == nil && resp.GetReady().GetValue() {
			return true, nil
		}
		last = err
		if !n.driver.alive() {
			return false, errors.New("the driver exited")
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the driver is not ready: %v (last Probe: %v)\n%s", err, last, tail(n.driverLog, logTailLines))
	}
}

// restartDriver kills the driver with SIGKILL, as a crash or an eviction
// would, and starts it again with the same flags and directories.
func (n *node) restartDriver(t *testing.T) {
	t.Helper()
	_ = n.conn.Close()
	n.driver.kill()
	n.startDriver(t)
}

// waitForSocket waits until path is a unix socket, and returns an error
// when the process exits or readyTimeout passes first.
func waitForSocket(ctx context.Context, path string, p *process) error {
	return poll.Wait(ctx, readyTimeout, func(context.Context) (bool, error) {
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return true, nil
		}
		if !p.alive() {
			return false, fmt.Errorf("%s exited: %s", p.name, exitStatus(p.err))
		}
		return false, nil
	})
}

// forbid records a value that must never appear in the node's logs, nor
// in any log of the suite (usedSecrets).
func (n *node) forbid(value, what string) {
	usedSecrets.add(what, value)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.forbidden = append(n.forbidden, secretValue{label: what, value: value})
}

// forbiddenValues returns what forbid recorded.
func (n *node) forbiddenValues() []secretValue {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.forbidden)
}

// checkLogs fails the test when a log of the node holds a forbidden value
// (it names the value's kind, never the value) or a panic.
func (n *node) checkLogs(t *testing.T) {
	t.Helper()
	for _, log := range []string{n.driverLog, n.providerLog} {
		n.checkLog(t, log)
	}
}

// checkLog fails the test when the log at path holds a value forbid
// recorded, in any spelling the suite's log scan looks for, or reports a
// panic or a data race.
func (n *node) checkLog(t *testing.T, path string) {
	t.Helper()
	hits, _, err := scanLog(path, filepath.Base(path), newNeedleIndex(n.forbiddenValues()))
	if err != nil {
		t.Errorf("reading %s: %v", path, err)
		return
	}
	for _, h := range hits {
		t.Errorf("a log holds a secret value: %s", h)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("reading %s: %v", path, err)
		return
	}
	if bytes.Contains(data, []byte("panic:")) || bytes.Contains(data, []byte("DATA RACE")) {
		t.Errorf("%s reports a panic or a data race:\n%s", filepath.Base(path), tail(path, logTailLines))
	}
}

func (n *node) cleanup(t *testing.T) {
	var errs []error
	if n.conn != nil {
		_ = n.conn.Close()
	}
	for _, p := range []*process{n.driver, n.provider} {
		if p != nil {
			errs = append(errs, p.stop())
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Errorf("stopping node %s: %v", n.name, err)
	}
	n.checkLogs(t)
	if t.Failed() {
		t.Logf("node %s: last lines of the driver log:\n%s", n.name, tail(n.driverLog, logTailLines))
		t.Logf("node %s: last lines of the provider log:\n%s", n.name, tail(n.providerLog, logTailLines))
	}
	unmounted, err := unmountAll(n.dir)
	if err != nil {
		t.Errorf("unmounting what node %s left: %v", n.name, err)
		return // never remove a directory that still has mounts
	}
	if unmounted > 0 {
		t.Logf("node %s: unmounted %d mount(s) left behind", n.name, unmounted)
	}
	if err := os.RemoveAll(n.dir); err != nil {
		t.Errorf("removing node %s: %v", n.name, err)
	}
}

// writeObject puts an object into the local provider's root, atomically
// (a provider call reads the old or the new content). Its content is a
// secret: no log may hold it.
func (n *node) writeObject(t *testing.T, name string, content []byte) {
	t.Helper()
	n.forbid(string(content), fmt.Sprintf("the content of object %q of node %s's local provider", name, n.name))
	path := filepath.Join(n.providerRoot, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
