package atomicwrite

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/klog/v2"
)

// Write atomically replaces the whole content of dir with files. It validates
// every path first (ValidatePath, duplicates, and a file that is also a
// directory of another file like "a" and "a/b") and writes nothing if any is
// bad. It returns changed=false and writes nothing when dir already holds
// exactly these files (same set of paths, modes, bytes) in a tidy layout.
//
// A failure before the swap of ..data leaves the old content intact and
// returns changed=false. changed=true with an error means the new content is
// live but a top-level link or the cleanup failed; the next Write repairs it.
func Write(dir string, files []File) (changed bool, err error) {
	want, err := normalize(files)
	if err != nil {
		return false, err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return false, err
	}
	defer unlock()

	names := topLevelNames(want)
	if unchanged(dir, want, names) {
		return false, nil
	}
	if err := checkNames(dir, names); err != nil {
		return false, err
	}
	gen, err := writeGeneration(dir, want)
	if err != nil {
		return false, err
	}
	if err := swap(dir, gen); err != nil {
		return false, err
	}
	if err := publish(dir, gen, names); err != nil {
		return true, err
	}
	klog.V(4).InfoS("wrote volume generation", "targetPath", dir, "generation", gen, "files", len(want))
	return true, nil
}

// unchanged reports whether dir already holds exactly want, with every
// top-level link in place and nothing left to clean up.
func unchanged(dir string, want []File, names []string) bool {
	gen, got, err := readCurrent(dir)
	if err != nil {
		klog.V(2).InfoS("rewriting volume with unreadable content", "targetPath", dir, "err", err)
		return false
	}
	if gen == "" || !slices.EqualFunc(got, want, sameFile) {
		return false
	}
	for _, name := range names {
		if !linked(dir, name) {
			return false
		}
	}
	stale, err := obsolete(dir, gen, names)
	return err == nil && len(stale) == 0
}

func sameFile(a, b File) bool {
	return a.Path == b.Path && a.Mode == b.Mode && bytes.Equal(a.Contents, b.Contents)
}

// swap points ..data at gen in one rename. On failure gen is removed and
// ..data is untouched.
func swap(dir, gen string) error {
	if err := replaceSymlink(dir, dataTmpLink, dataLink, gen); err != nil {
		return errors.Join(fmt.Errorf("swap %q to generation %q: %w", dataLink, gen, err),
			os.RemoveAll(filepath.Join(dir, gen)))
	}
	return nil
}

// publish runs after the swap: it adds the missing top-level links, then
// removes the links of files no longer present and every old generation.
func publish(dir, gen string, names []string) error {
	if err := linkNames(dir, names); err != nil {
		return err
	}
	stale, err := obsolete(dir, gen, names)
	if err != nil {
		return fmt.Errorf("list old entries: %w", err)
	}
	if err := removeEntries(dir, stale); err != nil {
		return fmt.Errorf("remove old entries: %w", err)
	}
	return nil
}
