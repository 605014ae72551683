package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/internal/cliflag/cliflagtest"
)

func parse(t *testing.T, env map[string]string, args ...string) (*config, error) {
	t.Helper()
	fs := flag.NewFlagSet("keymount-controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return parseFlags(fs, args, func(k string) string { return env[k] })
}

// TestFlagsAsTheSyncController: the sync controller's flags parse with its
// defaults and meanings; audiences repeat and split on commas; the pod's
// downward-API variables fill the request's pod keys and the namespace.
func TestFlagsAsTheSyncController(t *testing.T) {
	env := map[string]string{syncrequest.EnvPodNamespace: "kube-system", syncrequest.EnvPodName: "c-0", syncrequest.EnvPodUID: "u"}
	cfg, err := parse(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.providerVolume != "/provider" || cfg.maxRecvMsgSize != 4<<20 || cfg.metricsAddr != ":8085" || cfg.probeAddr != ":8081" ||
		cfg.sync.PollInterval != 12*time.Hour || cfg.leaderElect || len(cfg.sync.Audiences) != 0 {
		t.Errorf("defaults: %+v, want the sync controller's", cfg)
	}
	if cfg.namespace != "kube-system" || cfg.leaderElectionNamespace != "kube-system" || cfg.sync.Pod.Name != "c-0" || cfg.sync.Pod.UID != "u" {
		t.Errorf("pod %+v namespace %q lease namespace %q, want them from the environment", cfg.sync.Pod, cfg.namespace, cfg.leaderElectionNamespace)
	}
	cfg, err = parse(t, env, "--token-request-audience=a,b", "--token-request-audience", "c", "--rotation-poll-interval=0s",
		"--leader-elect", "--leader-election-namespace=le", "--provider-volume=/p", "--max-call-recv-msg-size=1024")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.sync.Audiences, []string{"a", "b", "c"}) || cfg.sync.PollInterval != 0 || !cfg.leaderElect ||
		cfg.leaderElectionNamespace != "le" || cfg.providerVolume != "/p" || cfg.maxRecvMsgSize != 1024 {
		t.Errorf("parsed %+v", cfg)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, "--namespace is empty"},
		{nil, []string{"--namespace=x", "--max-call-recv-msg-size=0"}, "--max-call-recv-msg-size"},
		{nil, []string{"--namespace=x", "--workers=0"}, "--workers"},
		{nil, []string{"--namespace=x", "--provider-timeout=0s"}, "--provider-timeout"},
		{nil, []string{"--namespace=x", "--fanout-kube-api-qps=0"}, "--fanout-kube-api-qps"},
		{nil, []string{"--no-such-flag"}, "no-such-flag"},
	} {
		if _, err := parse(t, tt.env, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want one naming %s", tt.args, err, tt.want)
		}
	}
	if cfg, err := parse(t, nil, "--version"); err != nil || !cfg.printVersion {
		t.Errorf("--version without a namespace: %v", err)
	}
}

// TestFlagEnableFanout: fan-out is off unless asked for.
func TestFlagEnableFanout(t *testing.T) {
	cfg, err := parse(t, nil, "--namespace=x")
	if err != nil || cfg.enableFanout {
		t.Fatalf("default: enableFanout %v (%v), want off", cfg != nil && cfg.enableFanout, err)
	}
	if cfg, err = parse(t, nil, "--namespace=x", "--enable-fanout"); err != nil || !cfg.enableFanout {
		t.Fatalf("--enable-fanout: %v", err)
	}
}

// TestMemProfileRate: no heap sampling while no profile can be read; the
// runtime's rate with the pprof endpoints on or GODEBUG's memprofilerate.
func TestMemProfileRate(t *testing.T) {
	for _, c := range []struct {
		addr, godebug string
		want          int
	}{
		{"", "", 0},
		{"0", "", 0},
		{"0", "x509negativeserial=1", 0},
		{"127.0.0.1:6060", "", 512 * 1024},
		{"", "memprofilerate=4096", 512 * 1024},
	} {
		if got := memProfileRate(c.addr, c.godebug, 512*1024); got != c.want {
			t.Errorf("memProfileRate(%q, %q) = %d, want %d", c.addr, c.godebug, got, c.want)
		}
	}
}

// TestFlagMistakeIsOneLine: keymount-controller's main refuses an unknown
// flag, a bad value, a missing value and a value its check refuses with one
// line naming the flag and --help, exit 2; --help prints every flag, exit 0.
func TestFlagMistakeIsOneLine(t *testing.T) {
	t.Setenv(syncrequest.EnvPodNamespace, "kube-system")
	cliflagtest.CheckMain(t, "keymount-controller", main, []cliflagtest.Mistake{
		{Args: []string{"--foo"}, Flag: "-foo"},
		{Args: []string{"--leader-elect", "--provider-timeout=soon"}, Flag: "-provider-timeout"},
		{Args: []string{"--workers"}, Flag: "-workers"},
		{Args: []string{"--workers=0"}, Flag: "--workers"},
	}, "-provider-volume", "-enable-fanout")
}
