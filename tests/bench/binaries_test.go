package bench_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/keymount/keymount/tests/childproc"
	"github.com/keymount/keymount/tests/harness"
)

// binaryTimeout bounds how long a binary may take to come up or to stop.
const binaryTimeout = 30 * time.Second

// daemonSetPath is the shipped DaemonSet, relative to this package.
const daemonSetPath = "../../deploy/daemonset.yaml"

// buildBinaries builds keymount-driver and keymount-provider-local into dir.
func buildBinaries(b *testing.B, dir string) (driverBin, providerBin string) {
	b.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		b.Fatalf("find the go command to build the binaries: %v", err)
	}
	cmd := exec.CommandContext(b.Context(), goBin, "build", "-o", dir+string(filepath.Separator),
		"github.com/keymount/keymount/cmd/keymount-driver",
		"github.com/keymount/keymount/cmd/keymount-provider-local")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "keymount-driver"), filepath.Join(dir, "keymount-provider-local")
}

// daemonSetContainer returns the keymount container of the shipped
// DaemonSet.
func daemonSetContainer(b *testing.B) corev1.Container {
	b.Helper()
	var ds appsv1.DaemonSet
	readManifest(b, daemonSetPath, &ds)
	return containerNamed(b, daemonSetPath, ds.Spec.Template.Spec, "secrets-store")
}

// controllerDeploymentPath is the shipped keymount-controller Deployment
// (the kustomize component, kept equal to the chart's by drift_test.go).
const controllerDeploymentPath = "../../deploy/components/controller/deployment.yaml"

// controllerContainer returns the controller container of the shipped
// keymount-controller Deployment.
func controllerContainer(b *testing.B) corev1.Container {
	b.Helper()
	var d appsv1.Deployment
	readManifest(b, controllerDeploymentPath, &d)
	return containerNamed(b, controllerDeploymentPath, d.Spec.Template.Spec, "controller")
}

// readManifest decodes the YAML manifest at path into obj, strictly.
func readManifest(b *testing.B, path string, obj any) {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatalf("read %s: %v", path, err)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		b.Fatalf("decode %s: %v", path, err)
	}
}

func containerNamed(b *testing.B, path string, spec corev1.PodSpec, name string) corev1.Container {
	b.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	b.Fatalf("%s has no %s container", path, name)
	return corev1.Container{}
}

// memoryEnv is the Go runtime's memory settings the DaemonSet gives the
// driver, as NAME=value: each variable a literal, or limits.memory through
// the downward API (divided by its divisor and rounded up, as kubelet does).
func memoryEnv(b *testing.B, c corev1.Container) []string {
	b.Helper()
	var env []string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" || e.Name == "GOGC" {
			env = append(env, e.Name+"="+envValue(b, c, e))
		}
	}
	return env
}

// memoryArgs is the DaemonSet's memory and size flags of the driver, so
// that the benchmark runs what ships: none means the binary's defaults.
func memoryArgs(c corev1.Container) []string {
	var args []string
	for _, a := range c.Args {
		for _, f := range []string{"--provider-concurrency=", "--provider-inflight-bytes=", "--provider-max-recv-size=", "--tmpfs-size="} {
			if strings.HasPrefix(a, f) {
				args = append(args, a)
			}
		}
	}
	return args
}

func envValue(b *testing.B, c corev1.Container, e corev1.EnvVar) string {
	b.Helper()
	if e.ValueFrom == nil {
		return e.Value
	}
	ref := e.ValueFrom.ResourceFieldRef
	if ref == nil || ref.Resource != "limits.memory" {
		b.Fatalf("container %s env %s: only a literal value or resourceFieldRef limits.memory is understood here", c.Name, e.Name)
	}
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		b.Fatalf("env %s comes from limits.memory, which container %s does not set", e.Name, c.Name)
	}
	divisor := int64(1)
	if !ref.Divisor.IsZero() {
		divisor = ref.Divisor.Value()
	}
	// Kubelet rounds up.
	return strconv.FormatInt((limit.Value()+divisor-1)/divisor, 10)
}

// child is a running binary whose output goes to a log file. It dies with
// the benchmark binary (see childproc).
type child struct {
	name string
	log  string
	cmd  *exec.Cmd
	proc *childproc.Proc
}

// startChild starts binary with exactly env (nothing inherited) and args.
func startChild(name, logPath, binary string, env []string, args ...string) (*child, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer func() { _ = log.Close() }() // the child has its own descriptor
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	proc, err := childproc.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return &child{name: name, log: logPath, cmd: cmd, proc: proc}, nil
}

// stop sends SIGTERM and waits for a clean exit, killing the child after
// binaryTimeout.
func (c *child) stop() error {
	if err := c.proc.Stop(binaryTimeout); err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	return nil
}

// exitErr is how the exited child ended, as an error also for status 0.
func (c *child) exitErr() error {
	if err := c.proc.Err(); err != nil {
		return err
	}
	return errors.New("exit status 0")
}

// logTail is the end of the child's log, for failure messages.
func (c *child) logTail() string {
	data, _ := os.ReadFile(c.log)
	const n = 4 << 10
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

// statusKiB reads a "<field>: <n> kB" line of /proc/<pid>/status.
func statusKiB(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), field+":")
		if !ok {
			continue
		}
		v := strings.TrimSuffix(strings.TrimSpace(rest), " kB")
		return strconv.ParseInt(v, 10, 64)
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// waitForFile waits until path exists or c has exited.
func waitForFile(path string, c *child) error {
	deadline := time.Now().Add(binaryTimeout)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-c.proc.Exited():
			return fmt.Errorf("%s exited before creating %s: %w\n%s", c.name, path, c.exitErr(), c.logTail())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return fmt.Errorf("no %s after %s\n%s", path, binaryTimeout, c.logTail())
}

// waitReady polls the driver's Probe until it says ready.
func waitReady(conn *grpc.ClientConn, c *child) error {
	id := csi.NewIdentityClient(conn)
	deadline := time.Now().Add(binaryTimeout)
	last := errors.New("no probe answered")
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := id.Probe(ctx, &csi.ProbeRequest{})
		cancel()
		if err == nil && resp.GetReady().GetValue() {
			return nil
		}
		last = err
		if err == nil {
			last = errors.New("probe says not ready")
		}
		select {
		case <-c.proc.Exited():
			return fmt.Errorf("%s exited before it was ready: %w\n%s", c.name, c.exitErr(), c.logTail())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return fmt.Errorf("driver not ready after %s (last probe: %w)\n%s", binaryTimeout, last, c.logTail())
}

// unmountAndRemove detaches every mount under dir and removes it.
func unmountAndRemove(dir string) error {
	if _, err := harness.UnmountAll(dir); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
