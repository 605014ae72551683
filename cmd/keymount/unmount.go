package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	mount "k8s.io/mount-utils"

	"github.com/keymount/keymount/cmd/keymount/internal/session"
)

// unmountConfig is every flag of "keymount unmount".
type unmountConfig struct {
	target   string
	stateDir string
	timeout  time.Duration
	verbose  bool
}

// unmountUsage is the help of "keymount unmount", before its flags.
const unmountUsage = `Usage: keymount unmount DIR [flags]

Unmounts DIR, mounted by "keymount mount": the read-only bind mount on DIR
and DIR itself go, then keymount's unpublish pipeline removes the volume from
its private kubelet-style directory and its tmpfs. Unmounting a directory
that is not mounted succeeds. Needs root.

Flags:
`

func newUnmountFlags(cfg *unmountConfig, out io.Writer) *flag.FlagSet {
	fs := newFlagSet("unmount", unmountUsage, out)
	fs.StringVar(&cfg.stateDir, "state-dir", defaultStateDir, "the `dir`ectory given to mount as --state-dir")
	fs.DurationVar(&cfg.timeout, "timeout", 60*time.Second, "give up after this long")
	fs.BoolVar(&cfg.verbose, "verbose", false, "print the driver's logs on stderr")
	return fs
}

// unmountCommand runs "keymount unmount".
func unmountCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := &unmountConfig{}
	fs := newUnmountFlags(cfg, stderr)
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageErrorf("unmount takes one directory, got %d arguments", len(rest))
	}
	if cfg.timeout <= 0 {
		return usageErrorf("unmount: --timeout must be positive")
	}
	if cfg.target, err = absPath("DIR", rest[0]); err != nil {
		return err
	}
	if cfg.stateDir, err = absPath("--state-dir", cfg.stateDir); err != nil {
		return err
	}
	return runUnmount(ctx, cfg, stdout)
}

// runUnmount unpublishes the volume at the target. It refuses a target that
// is mounted but holds no keymount volume of this state directory, so that
// a typo never unmounts something else.
func runUnmount(ctx context.Context, cfg *unmountConfig, stdout io.Writer) (err error) {
	quietLogs(cfg.verbose)
	s, err := session.Start(session.Config{Version: version, StateDir: cfg.stateDir, ProviderDir: defaultProviderDir})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close()) }()

	rec, err := s.Record(cfg.target)
	if err != nil {
		return err
	}
	mounted, err := isMountPoint(cfg.target)
	if err != nil {
		return err
	}
	if rec == nil && mounted {
		return fmt.Errorf("%s is mounted, but not by keymount with --state-dir %s: leaving it alone", cfg.target, cfg.stateDir)
	}
	if _, err := s.Unbind(cfg.target); err != nil {
		if errors.Is(err, session.ErrTargetInUse) {
			return fmt.Errorf("%s is mounted, but does not show the keymount volume of --state-dir %s: leaving it alone", cfg.target, cfg.stateDir)
		}
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if err := s.Unpublish(ctx, cfg.target); err != nil {
		return newCallError(ctx, "unmount", err)
	}
	if rec == nil && !mounted {
		_, err = fmt.Fprintf(stdout, "nothing mounted at %s\n", cfg.target)
		return err
	}
	_, err = fmt.Fprintf(stdout, "unmounted %s\n", cfg.target)
	return err
}

// isMountPoint reports whether p is a mount point; false when p does not exist.
func isMountPoint(p string) (bool, error) {
	ok, err := mount.New("").IsMountPoint(p)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check mount point %s: %w", p, err)
	}
	return ok, nil
}
