package atomicwrite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"k8s.io/klog/v2"

	"github.com/keymount/keymount/internal/killpoint"
)

// retireGrace is how long a generation stays on disk after ..data stopped
// naming it. A reader's path lookup that read ..data just before a swap may
// be descheduled for a while before it reaches the file; deleting the old
// generation at once makes such a lookup fail with ENOENT.
const retireGrace = 5 * time.Second

// Write atomically replaces the whole content of dir with files. It validates
// every path first (ValidatePath, duplicates, and a file that is also a
// directory of another file like "a" and "a/b") and writes nothing if any is
// bad. It returns changed=false and writes nothing visible when dir already
// holds exactly these files (same set of paths, modes, bytes); it then only
// removes generations retired more than retireGrace ago.
//
// A failure before the swap of ..data leaves the old content intact and
// returns changed=false. changed=true with an error means the new content is
// live but a top-level link or the cleanup failed; the next Write repairs it.
//
// Files and directories are created in the writer's own group; WriteGroup
// chooses another.
func Write(dir string, files []File) (changed bool, err error) {
	return write(dir, files, keepGroup)
}

// WriteGroup is Write with a group: dir itself and every directory and file
// of the new generation belong to group gid (their owner stays the writer),
// with the same modes as Write gives them. The group is set before the swap
// of ..data, so no reader ever sees a file of the new generation in another
// group. Content counts as unchanged only when the current generation is in
// group gid too: a WriteGroup with another group than the last one writes a
// new generation. gid must be 0 to 2147483647, or the error wraps
// ErrInvalidGroup and nothing is written.
func WriteGroup(dir string, files []File, gid int) (changed bool, err error) {
	if gid < 0 || gid > maxGroup {
		return false, fmt.Errorf("%w %d: want 0 to %d", ErrInvalidGroup, gid, maxGroup)
	}
	return write(dir, files, gid)
}

func write(dir string, files []File, gid int) (changed bool, err error) {
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
	prev, same := inspect(dir, want, names, gid)
	if same {
		if err := setDirGroup(dir, gid); err != nil {
			return false, err
		}
		return false, cleanup(dir, names, keepGenerations(prev, prev, time.Now()))
	}
	if err := checkNames(dir, names); err != nil {
		return false, err
	}
	if err := makeRoom(dir, prev, Need(want)); err != nil {
		return false, err
	}
	gen, err := writeGeneration(dir, want, gid)
	if err != nil {
		return false, err
	}
	if err := setDirGroup(dir, gid); err != nil {
		return false, errors.Join(err, os.RemoveAll(filepath.Join(dir, gen)))
	}
	killpoint.Reached("write.generation")
	made, err := linkNames(dir, names)
	if err != nil {
		return false, errors.Join(err, unlink(dir, made), os.RemoveAll(filepath.Join(dir, gen)))
	}
	killpoint.Reached("write.linked")
	if err := swap(dir, gen); err != nil {
		return false, errors.Join(err, unlink(dir, made))
	}
	killpoint.Reached("write.swapped")
	if err := finish(dir, names, gen, prev); err != nil {
		return true, err
	}
	killpoint.Reached("write.cleaned")
	klog.V(4).InfoS("wrote volume generation", "targetPath", dir, "generation", gen, "files", len(want))
	return true, nil
}

// inspect returns the current generation of dir, and whether it holds exactly
// want, in group gid, with every top-level link in place and no stale or
// temporary link. Retired generations do not count here.
func inspect(dir string, want []File, names []string, gid int) (string, bool) {
	gen, err := currentGeneration(dir)
	if err != nil {
		klog.V(2).InfoS("rewriting volume with unreadable content", "targetPath", dir, "err", err)
		return "", false
	}
	if gen == "" {
		return "", false
	}
	same, err := holds(filepath.Join(dir, gen), want, gid)
	if err != nil {
		klog.V(2).InfoS("rewriting volume with unreadable content", "targetPath", dir, "err", err)
	}
	if !same {
		return gen, false
	}
	for _, name := range names {
		if !linked(dir, name) {
			return gen, false
		}
	}
	stale, err := obsolete(dir, names, func(fs.DirEntry) bool { return true })
	return gen, err == nil && len(stale) == 0
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

// finish runs after the swap: it marks prev retired, and removes the links
// of files no longer present and the generations retired more than
// retireGrace ago.
func finish(dir string, names []string, gen, prev string) error {
	return errors.Join(retire(dir, prev), cleanup(dir, names, keepGenerations(gen, prev, time.Now())))
}

// keepGenerations keeps gen, prev, and every generation whose mtime, the time
// it was retired, is less than retireGrace before now.
func keepGenerations(gen, prev string, now time.Time) func(fs.DirEntry) bool {
	return func(e fs.DirEntry) bool {
		if e.Name() == gen || e.Name() == prev {
			return true
		}
		fi, err := e.Info()
		return err != nil || now.Sub(fi.ModTime()) < retireGrace
	}
}
