// Command keymount runs keymount's publish pipeline on the command line: it
// mounts the secrets of a SecretProviderClass into a directory exactly as the
// node plugin mounts them into a pod, without Kubernetes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/internal/logredact"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `keymount mounts the secrets of a SecretProviderClass into a directory,
through the same pipeline the keymount CSI node plugin runs for a pod.

Usage:
  keymount <command> [flags]

Commands:
  mount     mount a class's secrets into a directory (a private tmpfs)
  unmount   unmount a directory mounted by "keymount mount"
  convert   convert External Secrets manifests into a SecretProviderClass and a SecretSync
  version   print the version
  help      print this help, or a command's flags: keymount help mount

Run "keymount <command> -h" for the flags of a command.
`

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	logredact.Install() // no HTTP body (Secrets, tokens) in any log, at any -v
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand and turns its error into an exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		_, _ = fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "mount":
		err = mountCommand(ctx, rest, stdout, stderr)
	case "unmount":
		err = unmountCommand(ctx, rest, stdout, stderr)
	case "convert":
		err = convertCommand(rest, os.Stdin, stdout, stderr)
	case "version":
		err = versionCommand(rest, stdout)
	case "help", "-h", "-help", "--help":
		err = helpCommand(rest, stdout)
	default:
		err = &usageError{err: fmt.Errorf("unknown command %q", cmd), help: "keymount"}
		return exitCode(err, stderr)
	}
	var uerr *usageError
	if errors.As(err, &uerr) && uerr.help == "" {
		uerr.help = "keymount"
		if cmd == "mount" || cmd == "unmount" || cmd == "convert" {
			uerr.help += " " + cmd
		}
	}
	return exitCode(err, stderr)
}

func exitCode(err error, stderr io.Writer) int {
	var uerr *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &uerr):
		switch {
		case uerr.reported:
		case uerr.help != "":
			_, _ = fmt.Fprintf(stderr, "keymount: %v (see %s --help)\n", err, uerr.help)
		default:
			_, _ = fmt.Fprintf(stderr, "keymount: %v\n", err)
		}
		return exitUsage
	default:
		_, _ = fmt.Fprintf(stderr, "keymount: %v\n", err)
		return exitError
	}
}

func versionCommand(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return usageErrorf("version takes no arguments")
	}
	_, err := fmt.Fprintf(stdout, "keymount %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}

// helpCommand prints the usage, or the flags of the command named.
func helpCommand(args []string, stdout io.Writer) error {
	switch {
	case len(args) == 0:
		_, err := fmt.Fprint(stdout, usage)
		return err
	case len(args) == 1 && args[0] == "mount":
		newMountFlags(&mountConfig{}, stdout).Usage()
	case len(args) == 1 && args[0] == "unmount":
		newUnmountFlags(&unmountConfig{}, stdout).Usage()
	case len(args) == 1 && args[0] == "convert":
		newConvertFlags(&convertConfig{}, stdout).Usage()
	default:
		return usageErrorf("help: unknown command %q", args[0])
	}
	return nil
}

// quietLogs silences the structured logs of the in-process driver and
// provider, unless --verbose asks for them: the CLI reports the outcome
// itself.
func quietLogs(verbose bool) {
	if verbose {
		klog.ClearLogger()
		return
	}
	klog.SetLogger(logr.Discard())
}
