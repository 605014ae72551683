// Package cliflag parses a binary's command line so that a mistake costs one
// line: a wrong flag or a bad value prints "<binary>: <error> (see <binary>
// --help)" and nothing else, while -h or --help still prints the whole
// usage. The standard library's flag package prints the whole usage (40 to
// 110 lines here) after every error, burying the one line that matters.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// ExitUsage is the exit code of a command line that cannot run, as the flag
// package's ExitOnError uses.
const ExitUsage = 2

// Parse parses args into fs, which must have been made with
// flag.ContinueOnError. With -h or --help it prints fs's usage to
// fs.Output() and returns flag.ErrHelp. With a flag that is not defined, a
// value that does not parse, or a flag missing its value, it prints one line
// naming the flag and pointing to --help to fs.Output(), and returns that
// error. Parse restores fs's usage and output before it returns.
func Parse(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	// The flag package prints the error, then the usage, after every
	// mistake: both are silenced here and the one line printed below.
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		printUsage(fs)
		return err
	}
	_, _ = fmt.Fprintln(out, Line(fs.Name(), err))
	return err
}

// Line is the one line reporting a command line's error: "<binary>:
// <error> (see <binary> --help)", any line breaks of err folded into spaces.
func Line(binary string, err error) string {
	msg := strings.Join(strings.FieldsFunc(err.Error(), func(r rune) bool { return r == '\n' || r == '\r' }), " ")
	return fmt.Sprintf("%s: %s (see %s --help)", binary, msg, binary)
}

// ExitCode is the exit code after Parse returned err: 0 after --help,
// ExitUsage after a mistake.
func ExitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return ExitUsage
}

// printUsage prints fs's usage as the flag package does: fs.Usage when set,
// else "Usage of <name>:" and the flags' defaults.
func printUsage(fs *flag.FlagSet) {
	if fs.Usage != nil {
		fs.Usage()
		return
	}
	_, _ = fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
	fs.PrintDefaults()
}
