package main

import (
	"strings"
	"testing"
)

// TestFlagMistakeIsOneLine: a wrong flag, a bad value, a missing value, a
// refused combination and an unknown command each print exactly one line
// on stderr, naming the mistake and the --help to read, nothing on stdout,
// and exit 2; "keymount <command> --help" still prints the whole usage.
func TestFlagMistakeIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // substrings of the one line
	}{
		{[]string{"mount", "--no-such-flag"}, []string{"keymount mount: flag provided but not defined: -no-such-flag", "(see keymount mount --help)"}},
		{[]string{"mount", "-f", "c.yaml", "--timeout=soon"}, []string{`invalid value "soon" for flag -timeout`, "(see keymount mount --help)"}},
		{[]string{"mount", "-f"}, []string{"flag needs an argument: -f", "(see keymount mount --help)"}},
		{[]string{"mount", "-f", "c.yaml"}, []string{"--target is required", "(see keymount mount --help)"}},
		{[]string{"unmount", "dir", "--no-such-flag"}, []string{"keymount unmount: flag provided but not defined: -no-such-flag", "(see keymount unmount --help)"}},
		{[]string{"unmount", "dir", "--timeout=0s"}, []string{"--timeout must be positive", "(see keymount unmount --help)"}},
		{[]string{"convert", "--partial=maybe"}, []string{"-partial", "(see keymount convert --help)"}},
		{[]string{"convert", "--no-such-flag"}, []string{"-no-such-flag", "(see keymount convert --help)"}},
		{[]string{"--no-such-flag"}, []string{`unknown command "--no-such-flag"`, "(see keymount --help)"}},
		{[]string{"version", "--short"}, []string{"version takes no arguments", "(see keymount --help)"}},
	} {
		code, stdout, stderr := cli(t, tc.args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		ok := code == exitUsage && stdout == "" && len(lines) == 1
		for _, w := range tc.want {
			ok = ok && strings.Contains(lines[0], w)
		}
		if !ok {
			t.Errorf("keymount %s: exit %d, stdout %q, stderr:\n%s\nwant exit 2 and one line holding %q", strings.Join(tc.args, " "), code, stdout, stderr, tc.want)
		}
	}
	for _, cmd := range []string{"mount", "unmount", "convert"} {
		code, _, stderr := cli(t, cmd, "--help")
		if code != exitOK || strings.Count(stderr, "\n") <= 10 || !strings.Contains(stderr, "Usage: keymount "+cmd) || !strings.Contains(stderr, "--timeout") && cmd != "convert" {
			t.Errorf("keymount %s --help: exit %d, output:\n%s\nwant exit 0 and the whole usage", cmd, code, stderr)
		}
	}
}
