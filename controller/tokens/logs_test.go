package tokens

import (
	"flag"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/keymount/keymount/internal/klogtest"
)

// captureLogs sends klog, at verbosity 10, to the returned buffer until the
// test ends.
func captureLogs(t *testing.T) *klogtest.Buffer {
	t.Helper()
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	old := fs.Lookup("v").Value.String()
	if err := fs.Set("v", "10"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fs.Set("v", old); err != nil {
			t.Error(err)
		}
	})
	return klogtest.Capture(t, textlogger.Verbosity(10))
}

// TestNoTokenInLogs: every path that logs (a token obtained, a renewal
// failing while the old token serves) logs no token, nor does any error.
func TestNoTokenInLogs(t *testing.T) {
	logs := captureLogs(t)
	cs, api := newTokenAPI(t)
	m := newManager(t, cs, api, Config{})
	ctx := t.Context()
	var errs []string
	if _, err := m.Tokens(ctx, "ns", "sa", []string{"aud", ""}); err != nil {
		t.Fatal(err)
	}
	api.setFail(errForbidden())
	api.clk.Step(9 * time.Minute)
	if _, err := m.Tokens(ctx, "ns", "sa", []string{"aud"}); err != nil {
		t.Fatal(err)
	}
	api.clk.Step(2 * time.Minute)
	if _, err := m.Tokens(ctx, "ns", "sa", []string{"aud"}); err != nil {
		errs = append(errs, err.Error())
	}
	klog.Flush()
	out := logs.String()
	for _, want := range []string{"obtained a service account token", "cannot renew a service account token"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q (the capture does not work?):\n%s", want, out)
		}
	}
	if len(errs) != 1 {
		t.Errorf("%d errors, want 1 after expiry", len(errs))
	}
	for _, c := range api.calls() {
		if c.token == "" {
			continue
		}
		if strings.Contains(out, c.token) {
			t.Errorf("the logs hold token %s:\n%s", c.token, out)
		}
		for _, e := range errs {
			if strings.Contains(e, c.token) {
				t.Errorf("error %q holds a token", e)
			}
		}
	}
}
