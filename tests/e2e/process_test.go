package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/keymount/keymount/tests/childproc"
)

// stopGrace is how long a process may take to exit after SIGTERM before it
// is killed (and the test fails).
const stopGrace = 15 * time.Second

// process is a running binary whose output goes to a log file. It dies with
// the test binary (see childproc).
type process struct {
	name   string
	cmd    *exec.Cmd
	proc   *childproc.Proc
	exited chan struct{} // closed once err is set
	err    error         // proc.Err(), for the callers that read it
}

// startProcess starts binary with args, appending its stdout and stderr to
// logPath. The child inherits the test's environment.
func startProcess(name, logPath, binary string, args ...string) (*process, error) {
	return startEnvProcess(name, logPath, binary, nil, args...)
}

// startEnvProcess is startProcess with an explicit environment: a non-nil
// env is exactly what the child gets, nothing inherited. The log is
// recorded for the scan of the suite's logs.
func startEnvProcess(name, logPath, binary string, env []string, args ...string) (*process, error) {
	suiteLogs.add(logPath)
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer func() { _ = log.Close() }() // the child has its own descriptor
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	proc, err := childproc.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, proc: proc, exited: make(chan struct{})}
	go func() {
		p.err = proc.Err()
		close(p.exited)
	}()
	return p, nil
}

// alive reports whether the process has not exited.
func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits for a clean exit; a process that is still
// running after stopGrace is killed, and that is an error, as is an exit
// before stop was called or with a failure status.
func (p *process) stop() error {
	if err := p.proc.Stop(stopGrace); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

// exitStatus describes what Wait returned.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *process) kill() {
	p.proc.Kill()
	<-p.exited
}

// unmountAll detaches every mount at dir or below it, deepest first, until
// the mount table (/proc/self/mountinfo) shows none, and returns how many it
// unmounted.
func unmountAll(dir string) (int, error) {
	n := 0
	for range 16 {
		ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
		if err != nil {
			return n, fmt.Errorf("read the mount table: %w", err)
		}
		if len(ms) == 0 {
			return n, nil
		}
		sort.SliceStable(ms, func(i, j int) bool {
			return strings.Count(ms[i].Mountpoint, "/") > strings.Count(ms[j].Mountpoint, "/")
		})
		for _, m := range ms {
			switch err := unix.Unmount(m.Mountpoint, unix.MNT_DETACH); {
			case err == nil:
				n++
			case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
				// Gone with a mount above it.
			default:
				return n, fmt.Errorf("unmount %s: %w", m.Mountpoint, err)
			}
		}
	}
	return n, fmt.Errorf("mounts are still left under %s", dir)
}

// mountsUnder lists the mount points at dir or below it.
func mountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		t.Fatalf("read the mount table: %v", err)
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Mountpoint)
	}
	return out
}

// mountAt returns the topmost mount at exactly path, nil when there is none.
func mountAt(t testing.TB, path string) *mountinfo.Info {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(path))
	if err != nil {
		t.Fatalf("read the mount table: %v", err)
	}
	if len(ms) == 0 {
		return nil
	}
	return ms[len(ms)-1]
}

// childProcesses lists the live (not zombie) children of this process.
func childProcesses() ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == self && f[0] != "Z" {
			out = append(out, string(stat[:i+1])) // "pid (comm)"
		}
	}
	return out, nil
}

// checkNothingLeft fails the package when a process it started is still
// running or a node directory still exists or has mounts.
func checkNothingLeft(tb testing.TB) {
	procs, err := childProcesses()
	if err != nil {
		tb.Errorf("listing child processes: %v", err)
	}
	for _, p := range procs {
		tb.Errorf("process left running after the tests: %s", p)
	}
	for _, dir := range allNodes.dirs() {
		if ms := mountsUnder(tb, dir); len(ms) > 0 {
			tb.Errorf("mounts left after the tests: %v", ms)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			tb.Errorf("node directory %s left after the tests (%v)", dir, err)
		}
	}
}

// tail returns the last lines of a file.
func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
