package atomicwrite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	// dataLink names the current generation.
	dataLink = "..data"
	// dataTmpLink is the new ..data link before it is renamed into place.
	dataTmpLink = "..data_tmp"
	// nameTmpLink is a new top-level link before it is renamed into place.
	nameTmpLink = "..name_tmp"
)

// ErrConflict is wrapped when the volume directory holds an entry the writer
// does not manage where it needs to put one of its own.
var ErrConflict = errors.New("volume directory conflict")

// lockDir takes an exclusive flock on dir; the returned func releases it.
func lockDir(dir string) (func(), error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		_ = unix.Close(fd)
		return nil, &os.PathError{Op: "flock", Path: dir, Err: err}
	}
	return func() { _ = unix.Close(fd) }, nil
}

// checkNames fails when ..data or a top-level name is a real directory, which
// a symlink cannot be renamed over.
func checkNames(dir string, names []string) error {
	for _, name := range append([]string{dataLink}, names...) {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return fmt.Errorf("%w: %q in %q is a directory the writer does not manage", ErrConflict, name, dir)
		}
	}
	return nil
}

// linkTarget is where the top-level link of name points.
func linkTarget(name string) string {
	return dataLink + "/" + name
}

// replaceSymlink atomically makes dir/name a symlink to target, through the
// temporary link dir/tmp.
func replaceSymlink(dir, tmp, name, target string) error {
	tmpPath := filepath.Join(dir, tmp)
	if err := os.Remove(tmpPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Symlink(target, tmpPath); err != nil {
		return err
	}
	if err := os.Rename(tmpPath, filepath.Join(dir, name)); err != nil {
		return errors.Join(err, os.Remove(tmpPath))
	}
	return nil
}

// linkNames points every top-level name at ..data/name, leaving correct
// links alone, and returns the names it linked that had no link before. A
// name that does not exist yet (every name of a first publish) is linked in
// place: creating a symlink is atomic. Any other is replaced through a
// temporary link and a rename. Write links the names of a new generation
// before ..data names it: a new name dangles until the swap, and a crash at
// any moment leaves every name of the old or of the new generation linked.
func linkNames(dir string, names []string) (made []string, err error) {
	for _, name := range names {
		path, want := filepath.Join(dir, name), linkTarget(name)
		target, err := os.Readlink(path)
		switch {
		case err == nil && target == want:
			continue
		case errors.Is(err, fs.ErrNotExist):
			err = os.Symlink(want, path)
			if err == nil {
				made = append(made, name)
				continue
			}
			if !errors.Is(err, fs.ErrExist) {
				return made, fmt.Errorf("link %q: %w", name, err)
			}
		}
		if err := replaceSymlink(dir, nameTmpLink, name, want); err != nil {
			return made, fmt.Errorf("link %q: %w", name, err)
		}
	}
	return made, nil
}

// unlink removes the top-level links linkNames made for a generation that
// was never swapped in.
func unlink(dir string, made []string) error {
	var errs []error
	for _, name := range made {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove link %q of a generation not swapped in: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func linked(dir, name string) bool {
	target, err := os.Readlink(filepath.Join(dir, name))
	return err == nil && target == linkTarget(name)
}

// obsolete lists the entries of dir that the writer made and no longer needs:
// generation directories that keepGen rejects, leftover temporary links, and
// top-level links into ..data whose name is not in names. Entries the writer
// did not make are never listed.
func obsolete(dir string, names []string, keepGen func(fs.DirEntry) bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, e := range entries {
		if isObsolete(dir, names, keepGen, e) {
			stale = append(stale, e.Name())
		}
	}
	return stale, nil
}

func isObsolete(dir string, names []string, keepGen func(fs.DirEntry) bool, e fs.DirEntry) bool {
	name := e.Name()
	isLink := e.Type()&fs.ModeSymlink != 0
	switch {
	case name == dataLink:
		return false
	case name == dataTmpLink || name == nameTmpLink:
		return isLink
	case strings.HasPrefix(name, reservedPrefix):
		return e.IsDir() && !keepGen(e)
	case !isLink || isName(names, name):
		return false
	}
	target, err := os.Readlink(filepath.Join(dir, name))
	return err == nil && strings.HasPrefix(target, dataLink+"/")
}

// isName reports whether name is one of the sorted top-level names.
func isName(names []string, name string) bool {
	_, found := slices.BinarySearch(names, name)
	return found
}

// cleanup removes what obsolete lists.
func cleanup(dir string, names []string, keepGen func(fs.DirEntry) bool) error {
	stale, err := obsolete(dir, names, keepGen)
	if err != nil {
		return fmt.Errorf("list old entries: %w", err)
	}
	if err := removeEntries(dir, stale); err != nil {
		return fmt.Errorf("remove old entries: %w", err)
	}
	return nil
}

// removeEntries removes the named entries of dir. A directory is removed with
// its content; a symlink itself is removed, never what it points to.
func removeEntries(dir string, names []string) error {
	var errs []error
	for _, name := range names {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
