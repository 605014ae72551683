// Package cliflagtest runs a binary's main in a child process of its test
// binary, to check what a wrong flag and --help print, as a user sees it.
package cliflagtest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// argsEnv carries the child's command line, one argument a line.
const argsEnv = "KEYMOUNT_CLIFLAGTEST_ARGS"

// Mistake is a command line a binary must refuse in one line.
type Mistake struct {
	// Args is the command line after the binary's name.
	Args []string
	// Flag is the flag the line must name, as given ("-no-such-flag").
	Flag string
}

// CheckMain checks binary's main: each mistake prints exactly one line to
// stderr naming its flag and "(see <binary> --help)", nothing to stdout,
// and exits 2; --help prints the whole usage (more than ten lines naming
// every flag in helpFlags) and exits 0. Call it from a test of the binary's
// own package, named for it alone: the test re-runs its test binary with
// -test.run=^<the test's name>$, where CheckMain calls main with the
// mistake's arguments.
func CheckMain(t *testing.T, binary string, main func(), mistakes []Mistake, helpFlags ...string) {
	t.Helper()
	if args, ok := os.LookupEnv(argsEnv); ok {
		os.Args = append([]string{binary}, strings.Split(args, "\n")...)
		main()
		return
	}
	for _, m := range mistakes {
		stdout, stderr, code := runMain(t, m.Args)
		want := "(see " + binary + " --help)"
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != 2 || stdout != "" || len(lines) != 1 || !strings.Contains(lines[0], m.Flag) || !strings.HasSuffix(lines[0], want) ||
			!strings.HasPrefix(lines[0], binary+": ") {
			t.Errorf("%s %s: exit %d, stdout %q, stderr:\n%s\nwant exit 2 and one line on stderr naming %s and ending %q",
				binary, strings.Join(m.Args, " "), code, stdout, stderr, m.Flag, want)
		}
	}
	for _, help := range []string{"--help", "-h"} {
		stdout, stderr, code := runMain(t, []string{help})
		out := stdout + stderr
		if code != 0 || strings.Count(out, "\n") <= 10 {
			t.Errorf("%s %s: exit %d, output:\n%s\nwant exit 0 and the whole usage", binary, help, code, out)
		}
		for _, f := range helpFlags {
			if !strings.Contains(out, f) {
				t.Errorf("%s %s: the usage does not name %s:\n%s", binary, help, f, out)
			}
		}
	}
}

// runMain runs the test binary's current test as a child calling main with
// args, and returns its output and exit code.
func runMain(t *testing.T, args []string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1") //nolint:gosec // the test binary itself, re-run.
	cmd.Env = append(os.Environ(), argsEnv+"="+strings.Join(args, "\n"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	default:
		t.Fatalf("run %s: %v", os.Args[0], err)
	}
	return out.String(), errOut.String(), code
}
