package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/keymount/keymount/internal/cliflag"
)

// parseArgs parses flags that may come before, between or after the
// positional arguments ("unmount DIR --state-dir X") and returns the
// positional arguments. Everything after "--" is positional. A mistake
// prints one line naming it and --help, as cliflag.Parse does.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := cliflag.Parse(fs, args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{err: err, reported: true}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(positional, rest...), nil
		}
		args = rest
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// Defaults shared by the subcommands.
const (
	defaultStateDir    = "/run/keymount-cli"
	defaultProviderDir = "/var/run/secrets-store-csi-providers"
)

// isSet reports whether the command line set the flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// absPath makes a flag's path absolute and clean.
func absPath(flagName, p string) (string, error) {
	if p == "" {
		return "", usageErrorf("%s is empty", flagName)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", flagName, p, err)
	}
	return abs, nil
}

// newFlagSet returns the flag set of "keymount <command>": errors and help
// go to out, the help is usage followed by the flags.
func newFlagSet(command, usage string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("keymount "+command, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		_, _ = fmt.Fprint(fs.Output(), usage)
		printFlags(fs)
	}
	return fs
}

// printFlags prints the flags of fs in two columns, as people type them:
// --name for long names, -f for one letter.
func printFlags(fs *flag.FlagSet) {
	tw := tabwriter.NewWriter(fs.Output(), 0, 0, 2, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		arg, usage := flag.UnquoteUsage(f)
		if arg != "" {
			arg = " " + arg
		}
		if g, ok := f.Value.(flag.Getter); ok && f.DefValue != "" && f.DefValue != "false" {
			if _, isString := g.Get().(string); isString {
				usage += fmt.Sprintf(" (default %q)", f.DefValue)
			} else {
				usage += fmt.Sprintf(" (default %s)", f.DefValue)
			}
		}
		_, _ = fmt.Fprintf(tw, "  %s%s%s\t%s\n", dash, f.Name, arg, usage)
	})
	_ = tw.Flush()
}
