package k8senv

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// tailLines is how much of each process's log a failed test prints.
const tailLines = 40

// logSet holds one log file per process of the environment. When the test
// has failed, cleanup prints the end of each, since the files go with the
// test's temporary directory.
type logSet struct {
	t     testing.TB
	dir   string
	files map[string]*os.File
}

func newLogSet(t testing.TB, dir string) *logSet {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("k8senv: %v", err)
	}
	l := &logSet{t: t, dir: dir, files: map[string]*os.File{}}
	t.Cleanup(l.close)
	return l
}

// open returns the log file of the process called name, the same file for
// every call (stdout and stderr share it).
func (l *logSet) open(name string) *os.File {
	l.t.Helper()
	if f, ok := l.files[name]; ok {
		return f
	}
	f, err := os.Create(filepath.Join(l.dir, name+".log"))
	if err != nil {
		l.t.Fatalf("k8senv: %v", err)
	}
	l.files[name] = f
	return f
}

// tail returns the last lines of the log of the process called name.
func (l *logSet) tail(name string) string {
	data, err := os.ReadFile(filepath.Join(l.dir, name+".log"))
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func (l *logSet) close() {
	names := make([]string, 0, len(l.files))
	for name, f := range l.files {
		names = append(names, name)
		_ = f.Close()
	}
	if !l.t.Failed() {
		return
	}
	sort.Strings(names)
	for _, name := range names {
		l.t.Logf("k8senv: last lines of the %s log:\n%s", name, l.tail(name))
	}
}
