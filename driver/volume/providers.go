package volume

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// Providers returns the providers named by the records of the volumes the
// node holds, each once, sorted: the providers mounted volumes use. A
// record that cannot be read is skipped: the next call on its volume
// rebuilds or removes it.
func (m *Manager) Providers() ([]string, error) {
	entries, err := os.ReadDir(m.root)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		p := recordedProvider(filepath.Join(m.root, e.Name(), recordFile))
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// recordedProvider returns the provider the record at path names, "" when
// there is none or it cannot be read.
func recordedProvider(path string) string {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	var r struct {
		Provider string `json:"provider"`
	}
	if err := json.NewDecoder(io.LimitReader(f, maxRecordBytes)).Decode(&r); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	return r.Provider
}
