package cliflag_test

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/keymount/keymount/internal/cliflag"
)

func newFlagSet(out *bytes.Buffer) *flag.FlagSet {
	fs := flag.NewFlagSet("keymount-x", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.String("endpoint", "unix:///csi/csi.sock", "CSI endpoint")
	fs.Duration("timeout", time.Minute, "deadline of one call")
	fs.Bool("verbose", false, "say more")
	return fs
}

// TestParseMistakeIsOneLine: an unknown flag, a bad value, a missing value
// and bad syntax each print exactly one line naming the flag and pointing
// to --help, never the usage, and exit 2.
func TestParseMistakeIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--foo"}, "keymount-x: flag provided but not defined: -foo (see keymount-x --help)"},
		{[]string{"--endpoint=x", "-foo=1"}, "keymount-x: flag provided but not defined: -foo (see keymount-x --help)"},
		{[]string{"--timeout=soon"}, `keymount-x: invalid value "soon" for flag -timeout: parse error (see keymount-x --help)`},
		{[]string{"--verbose=maybe"}, `keymount-x: invalid boolean value "maybe" for -verbose: parse error (see keymount-x --help)`},
		{[]string{"--endpoint"}, "keymount-x: flag needs an argument: -endpoint (see keymount-x --help)"},
		{[]string{"---endpoint=x"}, "keymount-x: bad flag syntax: ---endpoint=x (see keymount-x --help)"},
	} {
		var out bytes.Buffer
		fs := newFlagSet(&out)
		err := cliflag.Parse(fs, tc.args)
		if err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: error %v, want a mistake", tc.args, err)
			continue
		}
		if got := out.String(); got != tc.want+"\n" {
			t.Errorf("%q printed:\n%s\nwant exactly one line:\n%s", tc.args, got, tc.want)
		}
		if code := cliflag.ExitCode(err); code != 2 {
			t.Errorf("%q: exit code %d, want 2", tc.args, code)
		}
		if fs.Output() != &out {
			t.Errorf("%q: Parse did not restore the output", tc.args)
		}
	}
}

// TestParseHelpPrintsUsage: -h and --help print the whole usage (the flag
// package's default, or the FlagSet's own Usage) and exit 0.
func TestParseHelpPrintsUsage(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help"} {
		var out bytes.Buffer
		err := cliflag.Parse(newFlagSet(&out), []string{"--endpoint=x", arg})
		if !errors.Is(err, flag.ErrHelp) || cliflag.ExitCode(err) != 0 {
			t.Errorf("%s: error %v exit %d, want flag.ErrHelp and 0", arg, err, cliflag.ExitCode(err))
		}
		for _, want := range []string{"Usage of keymount-x:", "-endpoint", "-timeout", "-verbose"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s printed:\n%s\nwant the usage with %q", arg, out.String(), want)
			}
		}
	}
	var out bytes.Buffer
	fs := newFlagSet(&out)
	fs.Usage = func() { _, _ = out.WriteString("custom usage\n") }
	if err := cliflag.Parse(fs, []string{"--help"}); !errors.Is(err, flag.ErrHelp) || out.String() != "custom usage\n" {
		t.Errorf("--help with a Usage of its own: %v, printed %q", err, out.String())
	}
	out.Reset()
	if err := cliflag.Parse(fs, []string{"--nope"}); err == nil || strings.Contains(out.String(), "custom usage") {
		t.Errorf("a mistake with a Usage of its own: %v, printed %q; want one line without the usage", err, out.String())
	}
}

// TestParseOK: flags parse into the set and nothing is printed.
func TestParseOK(t *testing.T) {
	var out bytes.Buffer
	fs := newFlagSet(&out)
	if err := cliflag.Parse(fs, []string{"--endpoint=unix:///x.sock", "--timeout=2s", "--verbose"}); err != nil || out.Len() != 0 {
		t.Fatalf("Parse: %v, printed %q", err, out.String())
	}
	if got := fs.Lookup("timeout").Value.String(); got != "2s" {
		t.Errorf("--timeout %s, want 2s", got)
	}
}

// TestLineFoldsLineBreaks: an error of several lines (a flag.Value's own)
// is printed as one.
func TestLineFoldsLineBreaks(t *testing.T) {
	if got := cliflag.Line("b", errors.New("bad value\nwant one of a, b")); got != "b: bad value want one of a, b (see b --help)" {
		t.Errorf("Line: %q", got)
	}
}
