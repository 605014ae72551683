package e2e

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// logVerbosity is the klog verbosity of every keymount process the suite
// starts: the most verbose, so that the scan of their logs for secret
// values (see scanSuiteLogs) covers everything a node could ever log,
// client-go's request and response bodies included.
const logVerbosity = "-v=10"

// maxHitsShown bounds how many log hits a failure lists.
const maxHitsShown = 50

// suiteLogs is every log file the suite's processes write. The files live
// in one directory that outlives the tests, for TestMain to scan.
var suiteLogs logRegistry

type logRegistry struct {
	mu    sync.Mutex
	root  string
	paths []string
}

// dir returns a new directory for the logs of one node, creating the
// suite's log directory on first use.
func (r *logRegistry) dir(name string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.root == "" {
		root, err := os.MkdirTemp("", "keymount-e2e-logs-")
		if err != nil {
			return "", err
		}
		r.root = root
	}
	dir := filepath.Join(r.root, name)
	return dir, os.Mkdir(dir, 0o700)
}

// add records a log file to scan; startEnvProcess records every log.
func (r *logRegistry) add(path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.paths, path) {
		r.paths = append(r.paths, path)
	}
}

func (r *logRegistry) snapshot() (root string, paths []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.root, slices.Clone(r.paths)
}

// remove deletes the suite's log directory.
func (r *logRegistry) remove() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.root == "" {
		return nil
	}
	return os.RemoveAll(r.root)
}

// scanSuiteLogs scans every log the suite's processes wrote for every
// secret value the tests used (CVE-2023-2878: a driver logged service
// account tokens); see scanLogs.
func scanSuiteLogs(w io.Writer) error {
	root, paths := suiteLogs.snapshot()
	return scanLogs(w, root, paths, usedSecrets.list())
}

// scanLogs scans the logs at paths (named relative to root) for secrets
// and writes a summary to w. It fails on any hit, naming the file, the line
// and the value's label, never the value, and when the scan would prove
// nothing: no value to look for, or no byte of log read.
func scanLogs(w io.Writer, root string, paths []string, secrets []secretValue) error {
	x := newNeedleIndex(secrets)
	var problems []string
	if len(x.needles) == 0 {
		problems = append(problems, fmt.Sprintf("no secret value of at least %d bytes was registered (%d shorter): the scan would prove nothing", minSecretLen, x.short))
	}
	var hits []logHit
	total := 0
	for _, path := range paths {
		name, err := filepath.Rel(root, path)
		if err != nil || strings.HasPrefix(name, "..") {
			name = path
		}
		h, n, err := scanLog(path, name, x)
		if err != nil {
			problems = append(problems, fmt.Sprintf("reading log %s: %v", name, err))
		}
		hits, total = append(hits, h...), total+n
	}
	if total == 0 {
		problems = append(problems, fmt.Sprintf("scanned 0 bytes of log in %d file(s): the scan would prove nothing", len(paths)))
	}
	_, _ = fmt.Fprintf(w, "e2e log scan: %d byte(s) in %d log file(s) under %s, %d secret value(s) in %d spelling(s) (%d shorter than %d bytes skipped): %d hit(s)\n",
		total, len(paths), root, x.values, len(x.needles), x.short, minSecretLen, len(hits))
	for i, h := range hits {
		if i == maxHitsShown {
			problems = append(problems, fmt.Sprintf("... and %d more hit(s)", len(hits)-i))
			break
		}
		problems = append(problems, "a log holds a secret value: "+h.String())
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "\n"))
}
