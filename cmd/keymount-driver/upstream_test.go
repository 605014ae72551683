package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/keymount/keymount/internal/logredact"
)

// upstreamArgs are the driver arguments upstream's v1.6 manifests and chart
// render, plus every other flag of upstream's driver.
var upstreamArgs = []string{
	"--endpoint=unix:///csi/csi.sock",
	"--nodeid=node-1",
	"--drivername=secrets-store.csi.k8s.io",
	"--provider-volume=/var/run/secrets-store-csi-providers",
	"--additional-provider-volume-paths=/etc/kubernetes/secrets-store-csi-providers",
	"--metrics-addr=:8095",
	"--enable-secret-rotation=false",
	"--rotation-poll-interval=2m",
	"--provider-health-check=false",
	"--provider-health-check-interval=2m",
	"--max-call-recv-msg-size=8388608",
	"--enable-pprof=false",
	"--pprof-port=6065",
	"--log-format-json=false",
	"--metrics-backend=Prometheus",
	"--v=5",
}

func TestUpstreamFlagsParse(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	cfg := mustParseFlagSet(t, fs, upstreamArgs)
	if cfg.driver.NodeID != "node-1" || cfg.driver.DriverName != "secrets-store.csi.k8s.io" ||
		cfg.driver.ProviderDir != "/var/run/secrets-store-csi-providers" ||
		cfg.additionalDirs != "/etc/kubernetes/secrets-store-csi-providers" || cfg.providerMaxRecv != 8<<20 ||
		cfg.driver.Endpoint != "unix:///csi/csi.sock" || cfg.rotation.Enabled || cfg.rotation.Interval != 2*time.Minute ||
		cfg.metricsAddr != ":8095" {
		t.Errorf("upstream flags mapped to %+v", cfg)
	}
	var ignored []string
	for name := range cfg.upstream.ignored.Given() {
		ignored = append(ignored, name)
	}
	slices.Sort(ignored)
	if len(ignored) != 0 {
		t.Errorf("ignored flags recorded: %v, want none: every upstream flag given has a meaning", ignored)
	}
	if cfg.driver.ProviderHealthCheckAll || cfg.driver.ProviderHealthInterval != 2*time.Minute || cfg.upstream.metricsBackend != "Prometheus" {
		t.Errorf("provider health flags: all %v every %s, metrics backend %q", cfg.driver.ProviderHealthCheckAll,
			cfg.driver.ProviderHealthInterval, cfg.upstream.metricsBackend)
	}

	// Bare boolean flags, as upstream's flag package allows them.
	cfg = mustParseFlags(t, []string{"--enable-secret-rotation", "--provider-health-check", "--enable-pprof", "--version"})
	if !cfg.rotation.Enabled || !cfg.driver.ProviderHealthCheckAll || !cfg.upstream.enablePprof || !cfg.upstream.version {
		t.Errorf("bare boolean flags: %+v, rotation %+v", cfg.upstream, cfg.rotation)
	}

	// keymount's own names still win when given after the alias.
	cfg = mustParseFlags(t, []string{"--nodeid=a", "--node-id=b"})
	if cfg.driver.NodeID != "b" {
		t.Errorf("--node-id after --nodeid: %q, want b", cfg.driver.NodeID)
	}
}

func TestUpstreamBadBool(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	cfg := &config{}
	addUpstreamFlags(fs, cfg)
	if err := fs.Parse([]string{"--provider-health-check=maybe"}); err == nil || !strings.Contains(err.Error(), "provider-health-check") {
		t.Errorf("a bad boolean: %v, want an error naming the flag", err)
	}
}

// TestMetricsBackend: upstream's --metrics-backend takes Prometheus in any
// case; any other backend is refused with the flags, naming the flag and
// the fix, before the driver does anything.
func TestMetricsBackend(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"--metrics-backend=Prometheus"}, true},
		{[]string{"--metrics-backend=prometheus"}, true},
		{[]string{"--metrics-backend=PROMETHEUS"}, true},
		{[]string{"--metrics-backend=stackdriver"}, false},
		{[]string{"--metrics-backend="}, false},
	} {
		fs := flag.NewFlagSet("keymount-driver", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		_, err := parseFlags(fs, tc.args)
		if tc.ok != (err == nil) {
			t.Errorf("%v: %v, want ok %v", tc.args, err, tc.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "--metrics-backend") || !strings.Contains(err.Error(), "prometheus")) {
			t.Errorf("%v: %q does not name the flag and the value to set", tc.args, err)
		}
	}
	fs := flag.NewFlagSet("keymount-driver", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := parseFlags(fs, []string{"--provider-health-check-interval=0s"}); err == nil || !strings.Contains(err.Error(), "--provider-health-check-interval") {
		t.Errorf("interval 0: %v, want the interval refused", err)
	}
}

// jsonLogHelperEnv makes TestJSONLogHelper act as a driver logging in JSON.
const jsonLogHelperEnv = "KEYMOUNT_TEST_JSON_LOG_HELPER"

const secretBody = `{"data":{"password":"c2VjcmV0LXZhbHVl"}}`

// TestJSONLogHelper is not a test on its own: TestJSONLogsRedactBodies runs
// the test binary with it, as a process whose klog is switched to JSON.
func TestJSONLogHelper(t *testing.T) {
	if os.Getenv(jsonLogHelperEnv) != "1" {
		return
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	cfg := mustParseFlagSet(t, fs, []string{"--log-format-json", "--v=10"})
	logredact.Install()
	cfg.upstream.applyLogFormat()
	// What client-go logs at -v=8 and above, both ways it does.
	klog.V(8).InfoS("Response Body", "body", secretBody)
	klog.Background().V(8).Info("Request Body", "body", secretBody)
	klog.InfoS("volume published", "volumeID", "csi-1")
	klog.Flush()
}

// TestJSONLogsRedactBodies: with --log-format-json the driver logs JSON
// lines, and the redaction of HTTP bodies still applies.
func TestJSONLogsRedactBodies(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestJSONLogHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), jsonLogHelperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("c2VjcmV0LXZhbHVl")) {
		t.Errorf("a body reached the JSON log:\n%s", out)
	}
	var published bool
	for _, line := range bytes.Split(out, []byte("\n")) {
		var entry map[string]any
		if json.Unmarshal(line, &entry) != nil {
			continue
		}
		if entry["msg"] == "volume published" && entry["volumeID"] == "csi-1" {
			published = true
		}
	}
	if !published {
		t.Errorf("no JSON line for the published volume in:\n%s", out)
	}
}

// TestPprofOnLoopback: --enable-pprof serves Go's pprof index on
// 127.0.0.1:--pprof-port, and nothing when off.
func TestPprofOnLoopback(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := l.Addr().(*net.TCPAddr)
	_ = l.Close()
	if !ok {
		t.Fatalf("%v is not a TCP address", l.Addr())
	}
	port := addr.Port
	cfg := mustParseFlags(t, []string{"--enable-pprof", "--pprof-port=" + strconv.Itoa(port)})
	stop, err := cfg.upstream.servePprof(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/debug/pprof/") //nolint:noctx // a test request
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("pprof index: %s", resp.Status)
	}
	off := mustParseFlags(t, nil)
	stopOff, err := off.upstream.servePprof(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	stopOff()
}
