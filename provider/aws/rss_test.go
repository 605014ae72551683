package aws_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/poll"
)

// rssMounts is how many mounts the provider serves before it is measured
// idle; rssParallel how many run at once.
const (
	rssMounts   = 1000
	rssParallel = 32
)

// BenchmarkIdleRSS1000Mounts: the real keymount-provider-aws binary (go
// build), with its defaults and the GOMEMLIMIT of
// deploy/providers/aws/daemonset.yaml, serves 1,000 mounts over its unix
// socket, each a pod of its own service account (IRSA: a service account
// read, an STS exchange and one BatchGetSecretValue of 10 secrets each),
// against fakeAWS and fakeKube on 127.0.0.1. When the mounts are done the
// provider is left idle: its heap profile is taken (which runs a
// collection) and VmRSS is read once it stops falling. idle-RSS-MiB is that
// VmRSS, peak-RSS-MiB the VmHWM, heap-inuse-MiB the live heap of the
// profile; the profile's largest holders are logged. One op is one whole
// run: build excluded, start to stop.
func BenchmarkIdleRSS1000Mounts(b *testing.B) {
	bin := buildProvider(b)
	rig := newColdRig(b)
	var idle, peak, heap float64
	for b.Loop() {
		p := startProvider(b, bin, rig)
		mountMany(b, rig, p.socket, rssMounts)
		heap = p.heapInuseMiB(b)
		idle = float64(p.idleRSS(b)) / (1 << 20)
		p.logMemory(b)
		peak = float64(procStatus(b, p.cmd.Process.Pid, "VmHWM")) / (1 << 20)
		p.stop(b)
	}
	b.ReportMetric(idle, "idle-RSS-MiB")
	b.ReportMetric(peak, "peak-RSS-MiB")
	b.ReportMetric(heap, "heap-inuse-MiB")
	if got := rig.aws.sts.Load(); got < rssMounts {
		b.Errorf("%d STS exchanges for %d mounts of distinct identities", got, rssMounts)
	}
}

// buildProvider builds cmd/keymount-provider-aws into a temporary
// directory.
func buildProvider(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "keymount-provider-aws")
	cmd := exec.CommandContext(context.Background(), "go", "build", "-o", bin, "github.com/keymount/keymount/cmd/keymount-provider-aws")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runningProvider is a started provider binary.
type runningProvider struct {
	cmd       *exec.Cmd
	done      chan error
	socket    string
	pprofAddr string
}

// startProvider runs bin against rig's endpoints with the DaemonSet's
// GOMEMLIMIT, and waits until its socket answers.
func startProvider(tb testing.TB, bin string, rig *coldRig) *runningProvider {
	tb.Helper()
	dir := sockettest.Dir(tb)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: fake, user: {}}]
contexts: [{name: fake, context: {cluster: fake, user: fake}}]
current-context: fake
`, rig.kube.url)), 0o600); err != nil {
		tb.Fatal(err)
	}
	port := freePort(tb)
	logFile, err := os.Create(filepath.Join(dir, "provider.log"))
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.CommandContext(context.Background(), bin,
		"--provider-dir="+dir, "--name=aws", "--region="+region, "--node-name=bench-node",
		"--kubeconfig="+kubeconfig, "--aws-endpoint="+rig.aws.url, "--sts-endpoint="+rig.aws.url,
		"--enable-pprof", "--pprof-port="+strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "AWS_EC2_METADATA_DISABLED=true", "AWS_REGION=", "GOMEMLIMIT="+manifestGOMEMLIMIT(tb))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &runningProvider{cmd: cmd, done: make(chan error, 1), socket: filepath.Join(dir, "aws.sock"),
		pprofAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	go func() { p.done <- cmd.Wait() }()
	tb.Cleanup(func() { p.stop(tb) })
	p.waitReady(tb, filepath.Join(dir, "provider.log"))
	return p
}

// waitReady waits until the provider answers Version on its socket.
func (p *runningProvider) waitReady(tb testing.TB, log string) {
	tb.Helper()
	err := poll.Wait(tb.Context(), time.Minute, func(ctx context.Context) (bool, error) {
		select {
		case err := <-p.done:
			p.done <- err
			out, _ := os.ReadFile(log)
			return false, fmt.Errorf("provider exited before serving: %w\n%s", err, out)
		default:
		}
		return p.answersVersion(ctx), nil
	})
	if err != nil {
		tb.Fatalf("provider socket %s not serving: %v", p.socket, err)
	}
}

// answersVersion reports whether the provider answers Version on its
// socket.
func (p *runningProvider) answersVersion(ctx context.Context) bool {
	if _, err := os.Stat(p.socket); err != nil {
		return false
	}
	conn, err := dialProvider(p.socket)
	if err != nil {
		return false
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = v1alpha1.NewCSIDriverProviderClient(conn).Version(ctx, &v1alpha1.VersionRequest{Version: "v1alpha1"})
	return err == nil
}

// stop sends SIGTERM and waits for the process; SIGKILL after 10 seconds.
func (p *runningProvider) stop(tb testing.TB) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		p.done <- <-p.done
		tb.Errorf("provider did not stop on SIGTERM within 10s; killed")
	}
}

func dialProvider(socket string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
}

// mountMany makes n mounts of distinct identities, rssParallel at once.
func mountMany(tb testing.TB, rig *coldRig, socket string, n int) {
	tb.Helper()
	conn, err := dialProvider(socket)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	client := v1alpha1.NewCSIDriverProviderClient(conn)
	next := make(chan int)
	var wg sync.WaitGroup
	for range rssParallel {
		wg.Go(func() {
			for i := range next {
				attrs, _ := json.Marshal(rig.coldMount(tb, 0, i).Attributes)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				resp, err := client.Mount(ctx, &v1alpha1.MountRequest{
					Attributes: string(attrs), Secrets: "{}", Permission: "420",
					TargetPath: fmt.Sprintf("/var/lib/kubelet/pods/uid-%d/volumes/kubernetes.io~csi/secrets/mount", i),
				})
				cancel()
				switch {
				case err != nil:
					tb.Errorf("mount %d: %v", i, err)
				case resp.GetError().GetCode() != "":
					tb.Errorf("mount %d: provider error %q", i, resp.GetError().GetCode())
				case len(resp.GetFiles()) != benchSecrets:
					tb.Errorf("mount %d: %d files, want %d", i, len(resp.GetFiles()), benchSecrets)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// heapInuseMiB fetches the heap profile (a collection runs first), logs
// its largest holders with go tool pprof -top, and returns the in-use heap.
func (p *runningProvider) heapInuseMiB(tb testing.TB) float64 {
	tb.Helper()
	data := p.pprof(tb, "heap?gc=1")
	profile := filepath.Join(tb.TempDir(), "heap.pb.gz")
	if err := os.WriteFile(profile, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	out, err := exec.CommandContext(context.Background(), "go", "tool", "pprof", "-top", "-nodecount=15",
		"-sample_index=inuse_space", profile).CombinedOutput()
	if err != nil {
		tb.Fatalf("go tool pprof: %v\n%s", err, out)
	}
	tb.Logf("heap after %d mounts, largest holders:\n%s", rssMounts, out)
	return inuseTotalMiB(tb, string(out))
}

// logMemory logs what the idle RSS is made of: anonymous and file-backed
// pages, and the runtime's own account (MemStats of the debug heap page).
func (p *runningProvider) logMemory(tb testing.TB) {
	tb.Helper()
	pid := p.cmd.Process.Pid
	var b strings.Builder
	for _, f := range []string{"VmRSS", "RssAnon", "RssFile"} {
		fmt.Fprintf(&b, "%s %.1f MiB, ", f, float64(procStatus(tb, pid, f))/(1<<20))
	}
	sc := bufio.NewScanner(bytes.NewReader(p.pprof(tb, "heap?debug=1")))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, f := range []string{"# Sys ", "# HeapSys ", "# HeapInuse ", "# HeapIdle ", "# HeapReleased ", "# StackSys ", "# GCSys ", "# OtherSys ", "# NumGC "} {
			if strings.HasPrefix(line, f) {
				b.WriteString(strings.TrimPrefix(line, "# ") + ", ")
			}
		}
	}
	tb.Logf("idle memory: %s", strings.TrimSuffix(b.String(), ", "))
}

// pprof fetches /debug/pprof/<page> from the provider.
func (p *runningProvider) pprof(tb testing.TB, page string) []byte {
	tb.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+p.pprofAddr+"/debug/pprof/"+page, nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("pprof %s: %v", page, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("pprof %s: HTTP %d, %v", page, resp.StatusCode, err)
	}
	return data
}

// inuseTotalMiB reads the total of pprof -top's "... of <total> total" line.
func inuseTotalMiB(tb testing.TB, top string) float64 {
	sc := bufio.NewScanner(strings.NewReader(top))
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, " of ")
		j := strings.Index(line, " total")
		if !strings.Contains(line, "Showing nodes") || i < 0 || j < i {
			continue
		}
		total := strings.TrimSpace(line[i+len(" of ") : j])
		for _, u := range []struct {
			suffix string
			scale  float64
		}{{"GB", 1024}, {"MB", 1}, {"kB", 1.0 / 1024}, {"B", 1.0 / (1 << 20)}} {
			if v, ok := strings.CutSuffix(total, u.suffix); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err == nil {
					return f * u.scale
				}
			}
		}
	}
	tb.Errorf("no total in pprof -top output")
	return 0
}

// idleRSS returns VmRSS once it stopped falling for a second (the
// runtime returns freed memory to the OS in the background), within a
// minute.
func (p *runningProvider) idleRSS(tb testing.TB) int64 {
	tb.Helper()
	pid := p.cmd.Process.Pid
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	low, lowAt := procStatus(tb, pid, "VmRSS"), time.Now()
	for range tick.C {
		rss := procStatus(tb, pid, "VmRSS")
		if rss < low {
			low, lowAt = rss, time.Now()
		}
		if time.Since(lowAt) >= time.Second || time.Now().After(deadline) {
			return low
		}
	}
	return low
}

// procStatus reads a "<field>: <n> kB" line of /proc/<pid>/status, in
// bytes.
func procStatus(tb testing.TB, pid int, field string) int64 {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// freePort returns a TCP port free on 127.0.0.1 a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		tb.Fatal(errors.New("not a TCP address"))
	}
	return addr.Port
}

// manifestGOMEMLIMIT is the GOMEMLIMIT the provider's DaemonSet sets, ""
// when it sets none.
func manifestGOMEMLIMIT(tb testing.TB) string {
	tb.Helper()
	data, err := os.ReadFile("../../deploy/providers/aws/daemonset.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for i, line := range lines {
		if strings.TrimSpace(line) == "- name: GOMEMLIMIT" && i+1 < len(lines) {
			v, ok := strings.CutPrefix(strings.TrimSpace(lines[i+1]), "value:")
			if ok {
				return strings.Trim(strings.TrimSpace(v), `"`)
			}
		}
	}
	return ""
}
