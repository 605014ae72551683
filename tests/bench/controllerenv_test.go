package bench_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// controllerBinaries are the binaries of the controller benchmark.
type controllerBinaries struct {
	controller, local, aws string
}

// buildControllerBinaries builds keymount-controller, keymount-provider-local
// and keymount-provider-aws into dir.
func buildControllerBinaries(b *testing.B, dir string) controllerBinaries {
	b.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		b.Fatalf("find the go command to build the binaries: %v", err)
	}
	cmd := exec.CommandContext(b.Context(), goBin, "build", "-o", dir+string(filepath.Separator),
		"github.com/keymount/keymount/cmd/keymount-controller",
		"github.com/keymount/keymount/cmd/keymount-provider-local",
		"github.com/keymount/keymount/cmd/keymount-provider-aws")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return controllerBinaries{
		controller: filepath.Join(dir, "keymount-controller"),
		local:      filepath.Join(dir, "keymount-provider-local"),
		aws:        filepath.Join(dir, "keymount-provider-aws"),
	}
}

// socketDir is a new directory for provider sockets, short whatever TMPDIR
// is (os.TempDir() may be long; /tmp is not): a unix socket path must stay
// under 108 bytes. It is removed when the benchmark ends.
func socketDir(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp("/tmp", "kmb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// startProvider starts a provider binary and waits for its socket.
func startProvider(b *testing.B, name, logPath, bin, socket string, env []string, args ...string) *child {
	b.Helper()
	c, err := startChild(name, logPath, bin, env, args...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := c.stop(); err != nil {
			b.Errorf("stop %s: %v", name, err)
		}
	})
	if err := waitForFile(socket, c); err != nil {
		b.Fatal(err)
	}
	return c
}

// syncCounts are keymount_controller_syncs_total by result.
type syncCounts map[string]float64

// ok is the syncs that succeeded.
func (s syncCounts) ok() float64 { return s["created"] + s["updated"] + s["unchanged"] }

// failed is the syncs that failed, whatever the reason.
func (s syncCounts) failed() float64 {
	var n float64
	for r, v := range s {
		if r != "created" && r != "updated" && r != "unchanged" {
			n += v
		}
	}
	return n
}

// controllerProc is a running keymount-controller.
type controllerProc struct {
	*child
	metricsURL string
	// pprofAddr is its --pprof-bind-address, "" when off.
	pprofAddr string
}

// startCPUProfile starts a CPU profile of the controller (pprof's
// /debug/pprof/profile, cpuProfileSeconds long) into path, and returns
// what waits for it to be written; with path "" it does nothing.
func (c *controllerProc) startCPUProfile(b *testing.B, path string) (wait func()) {
	b.Helper()
	if path == "" {
		return func() {}
	}
	if c.pprofAddr == "" {
		b.Fatalf("$%s is set but the controller has no --pprof-bind-address", envCPUProfile)
	}
	done := make(chan error, 1)
	go func() {
		done <- fetchTo(b.Context(), "http://"+c.pprofAddr+"/debug/pprof/profile?seconds="+strconv.Itoa(cpuProfileSeconds), path)
	}()
	return func() {
		if err := <-done; err != nil {
			b.Errorf("CPU profile: %v", err)
		}
	}
}

// cpuProfileSeconds is the length of startCPUProfile's profile: longer
// than a source change takes to reach 1,000 copies on a quiet machine.
const cpuProfileSeconds = 8

// fetchTo writes what a GET of url answers to the file path.
func fetchTo(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// writeHeapProfile writes the controller's heap profile (after a
// collection) to path; nothing when path is "".
func (c *controllerProc) writeHeapProfile(b *testing.B, path string) {
	b.Helper()
	if path == "" {
		return
	}
	if c.pprofAddr == "" {
		b.Fatalf("$%s is set but the controller has no --pprof-bind-address", envHeapProfile)
	}
	if err := fetchTo(b.Context(), "http://"+c.pprofAddr+"/debug/pprof/heap?gc=1", path); err != nil {
		b.Fatalf("heap profile: %v", err)
	}
	b.Logf("heap profile of the controller: %s (go tool pprof %s)", path, path)
}

// scrapeClient scrapes every controller's metrics: one client, so each
// scrape reuses a kept-alive connection. A client per scrape left one idle
// connection (a goroutine and 8 KiB of buffers on the controller's side)
// per scrape open until the end, counted in the controller's memory.
var scrapeClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}

// syncs scrapes the controller's sync counter.
func (c *controllerProc) syncs(ctx context.Context) (syncCounts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.metricsURL, http.NoBody)
	if err != nil {
		return nil, err
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", c.metricsURL, resp.Status)
	}
	return parseSyncs(resp.Body)
}

// parseSyncs reads keymount_controller_syncs_total{result="..."} lines of
// the Prometheus text format.
func parseSyncs(r io.Reader) (syncCounts, error) {
	const prefix = `keymount_controller_syncs_total{result="`
	out := syncCounts{}
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), prefix)
		if !ok {
			continue
		}
		result, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			return nil, fmt.Errorf("unexpected metric line %q", s.Text())
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", s.Text(), err)
		}
		out[result] = v
	}
	return out, s.Err()
}

// stallTimeout is how long a wait for the controller may see no progress
// before it fails: a bound that only fails a stuck benchmark, never a slow
// one.
const stallTimeout = 5 * time.Minute

// waitSyncs polls the controller's counters until done says so. A wait
// fails when the successful syncs do not move for stallTimeout.
func (c *controllerProc) waitSyncs(b *testing.B, what string, done func(syncCounts) bool) syncCounts {
	b.Helper()
	var last syncCounts
	lastOK, moved := -1.0, time.Now()
	for {
		cur, err := c.syncs(b.Context())
		if err == nil {
			last = cur
			if done(cur) {
				return cur
			}
			if cur.ok() != lastOK {
				lastOK, moved = cur.ok(), time.Now()
			}
		}
		if time.Since(moved) > stallTimeout {
			b.Fatalf("%s: no successful sync for %s (syncs %v, last scrape error %v)\n%s", what, stallTimeout, last, err, c.logTail())
		}
		select {
		case <-c.proc.Exited():
			b.Fatalf("%s: keymount-controller exited: %v\n%s", what, c.exitErr(), c.logTail())
		case <-b.Context().Done():
			b.Fatal(b.Context().Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// clockTicks is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on
// every Linux architecture keymount ships for).
const clockTicks = 100

// cpuSeconds is the user plus system CPU time pid has used.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields count from its
	// closing parenthesis. utime and stime are fields 14 and 15.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, errors.New("malformed /proc/<pid>/stat")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc/<pid>/stat")
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (utime + stime) / clockTicks, nil
}

// procMiB reads a kB field of /proc/<pid>/status in MiB.
func procMiB(b *testing.B, pid int, field string) float64 {
	b.Helper()
	kib, err := statusKiB(pid, field)
	if err != nil {
		b.Fatal(err)
	}
	return float64(kib) / 1024
}

// envInt is the integer environment variable name, or def when unset.
func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("$%s=%q: use a positive integer", name, v)
	}
	return n
}

// envDuration is the duration environment variable name, or def when unset.
func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("$%s=%q: use a positive duration such as 30s", name, v)
	}
	return d
}
