// Command probe is the one program of the real-node tier's container image
// (tests/nodeenv packs it, static, into keymount.test/probe): the pod sandbox
// and every test container run it.
//
//	probe pause               wait for SIGTERM (the sandbox's "pause")
//	probe show [-follow] F... print who the process is, then every file:
//	                          mode, group and content; with -follow, print
//	                          again whenever something changed, until SIGTERM
//	probe write F             try to create F, print the outcome, then wait
//	probe env NAME...         print each environment variable as
//	                          "env NAME=<value>" (or "env NAME unset"),
//	                          then wait for SIGTERM
//
// Each report is one line on stdout, which the tests read from the
// container's log on the node.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// pollInterval is how often show -follow reads its files again.
const pollInterval = 200 * time.Millisecond

func main() {
	os.Exit(run()) //nolint:forbidigo // the container's exit status is the probe's answer
}

// run does what the arguments ask and returns the exit status: 0, 1 when a
// file could not be read, 2 for bad usage.
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if len(os.Args) < 2 {
		return usage("probe pause | show [-follow] FILE... | write FILE | env NAME...")
	}
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "pause":
		<-ctx.Done()
	case "show":
		return show(ctx, args)
	case "env":
		if len(args) == 0 {
			return usage("probe env NAME...")
		}
		for _, name := range args {
			if v, ok := os.LookupEnv(name); ok {
				fmt.Printf("env %s=%s\n", name, v)
			} else {
				fmt.Printf("env %s unset\n", name)
			}
		}
		<-ctx.Done()
	case "write":
		if len(args) != 1 {
			return usage("probe write FILE")
		}
		fmt.Println(tryWrite(args[0]))
		<-ctx.Done()
	default:
		return usage("unknown command " + cmd)
	}
	return 0
}

func show(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("show", flag.ContinueOnError)
	follow := fs.Bool("follow", false, "print again on every change, until SIGTERM")
	if fs.Parse(args) != nil || fs.NArg() == 0 {
		return usage("probe show [-follow] FILE...")
	}
	fmt.Println(identity())
	last := map[string]string{}
	failed := false
	for {
		for _, f := range fs.Args() {
			line := describe(f)
			if last[f] != line {
				fmt.Println(line)
				last[f] = line
			}
			failed = failed || strings.Contains(line, " error=")
		}
		if !*follow {
			if failed {
				return 1
			}
			return 0
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(pollInterval):
		}
	}
}

// identity describes the process's user and groups.
func identity() string {
	groups, err := syscall.Getgroups()
	if err != nil {
		groups = nil
	}
	return fmt.Sprintf("id uid=%d gid=%d groups=%v", os.Getuid(), os.Getgid(), groups)
}

// describe is one line about file f: its mode, owner group and content, or
// why it cannot be read.
func describe(f string) string {
	info, err := os.Stat(f)
	if err != nil {
		return fmt.Sprintf("file %s error=%q", f, errText(err))
	}
	data, err := os.ReadFile(f)
	if err != nil {
		return fmt.Sprintf("file %s mode=%04o error=%q", f, info.Mode().Perm(), errText(err))
	}
	gid := -1
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		gid = int(st.Gid)
	}
	return fmt.Sprintf("file %s mode=%04o gid=%d content=%q", f, info.Mode().Perm(), gid, data)
}

func tryWrite(f string) string {
	err := os.WriteFile(f, []byte("probe"), 0o600) //nolint:gosec // G703: the test names the file
	if err == nil {
		return fmt.Sprintf("write %s ok", f)
	}
	return fmt.Sprintf("write %s error=%q", f, errText(err))
}

// errText is the system error's text without the path (already printed).
func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func usage(msg string) int {
	fmt.Fprintln(os.Stderr, "usage:", msg)
	return 2
}
