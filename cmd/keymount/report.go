package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// mountedFile is one file a pod would see: its path, mode and size. The
// contents are never read.
type mountedFile struct {
	path string
	mode fs.FileMode
	size int64
}

// printMounted tells what was mounted: the class, the target and every
// file with its mode and size.
func printMounted(w io.Writer, cfg *mountConfig, src *classSource) error {
	spc := src.spc
	files, err := listFiles(cfg.target, "")
	if err != nil {
		return fmt.Errorf("list mounted files: %w", err)
	}
	_, _ = fmt.Fprintf(w, "mounted %d %s of SecretProviderClass %q (provider %q) at %s (read-only)\n",
		len(files), plural(len(files), "file"), spc.Name, spc.Spec.Provider, cfg.target)
	width := 1
	for _, f := range files {
		width = max(width, len(strconv.FormatInt(f.size, 10)))
	}
	for _, f := range files {
		_, _ = fmt.Fprintf(w, "  %v  %*d B  %s\n", f.mode.Perm(), width, f.size, f.path)
	}
	if src.origin != "" {
		_, _ = fmt.Fprintf(w, "class read from %s; dry run: nothing was written to the cluster\n", src.origin)
	}
	hint := "keymount unmount " + cfg.target
	if cfg.stateDir != defaultStateDir {
		hint += " --state-dir " + cfg.stateDir
	}
	_, err = fmt.Fprintf(w, "remove with: %s\n", hint)
	return err
}

// listFiles lists the files under root/rel as a pod sees them: through the
// user-visible symlinks, leaving out the driver's own "..data" and
// generation entries at the top level.
func listFiles(root, rel string) ([]mountedFile, error) {
	entries, err := os.ReadDir(filepath.Join(root, rel))
	if err != nil {
		return nil, err
	}
	var files []mountedFile
	for _, e := range entries {
		if rel == "" && strings.HasPrefix(e.Name(), "..") {
			continue
		}
		p := filepath.Join(rel, e.Name())
		info, err := os.Stat(filepath.Join(root, p)) // follows the link into ..data
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, mountedFile{path: p, mode: info.Mode(), size: info.Size()})
			continue
		}
		sub, err := listFiles(root, p)
		if err != nil {
			return nil, err
		}
		files = append(files, sub...)
	}
	return files, nil
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
