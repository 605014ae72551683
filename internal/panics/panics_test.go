package panics

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/keymount/keymount/internal/klogtest"
)

func TestRecover(t *testing.T) {
	logged := klogtest.Capture(t)
	before := testutil.ToFloat64(recovered.WithLabelValues(Trigger))
	returned := func() (n int) {
		defer Recover(Trigger, "refresh of volume v")
		n = 1
		panicNow()
		return 3
	}()
	if returned != 1 {
		t.Errorf("the recovered function returned %d, want its named result as it stood (1)", returned)
	}
	if got := testutil.ToFloat64(recovered.WithLabelValues(Trigger)) - before; got != 1 {
		t.Errorf("keymount_panics_recovered_total{handler=trigger} grew by %v, want 1", got)
	}
	log := logged.String()
	for _, want := range []string{`"recovered a panic"`, `handler="trigger"`, `in="refresh of volume v"`,
		`panic="runtime error: invalid memory address or nil pointer dereference"`, "stack=", "panics.TestRecover"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestRecoverAs(t *testing.T) {
	klogtest.Capture(t)
	work := func(fail bool) (err error) {
		defer RecoverAs(Reporter, "status write", &err)
		if fail {
			panic(errors.New("broken invariant"))
		}
		return nil
	}
	if err := work(false); err != nil {
		t.Errorf("no panic: err = %v", err)
	}
	err := work(true)
	if err == nil || !strings.Contains(err.Error(), "status write panicked: broken invariant") {
		t.Errorf("err = %v, want one naming the work and the panic", err)
	}
}

func TestNoPanicReportsNothing(t *testing.T) {
	logged := klogtest.Capture(t)
	before := testutil.CollectAndCount(recovered)
	func() { defer Recover(Sweep, "nothing") }()
	if log := logged.String(); log != "" {
		t.Errorf("logged %q without a panic", log)
	}
	if got := testutil.ToFloat64(recovered.WithLabelValues(Sweep)); got != 0 {
		t.Errorf("counted %v panics without one", got)
	}
	if got := testutil.CollectAndCount(recovered); got != before || got != 5 {
		t.Errorf("%d series, want the 5 handlers, each present from the start", got)
	}
}

func TestTrim(t *testing.T) {
	tests := []struct {
		name  string
		stack string
		limit int
		want  string
	}{
		{"short", "abc", 5, "abc"},
		{"exact", "abcde", 5, "abcde"},
		{"long", "abcdefg", 5, "abcde\n... (stack truncated)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := trim([]byte(tc.stack), tc.limit); got != tc.want {
				t.Errorf("trim(%q, %d) = %q, want %q", tc.stack, tc.limit, got, tc.want)
			}
		})
	}
}

// panicNow panics as a bug would (a runtime error, not a panic call the
// linter sees as intended).
func panicNow() {
	var p *struct{ n int }
	if testing.Testing() {
		p = nil
	}
	_ = p.n
}
