package atomicwrite

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// shortSymlinkLen is the longest symlink target tmpfs keeps in the inode;
// a longer one takes a page.
const shortSymlinkLen = 128

// Need returns the bytes of tmpfs one generation of files takes: every file
// rounded up to whole pages (tmpfs allocates no less), plus a page for each
// top-level link whose target is too long to live in its inode.
// Directories take no pages.
func Need(files []File) int64 {
	page := int64(os.Getpagesize())
	var n int64
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		n += (int64(len(f.Contents)) + page - 1) / page * page
		name, _, _ := strings.Cut(f.Path, "/")
		if !seen[name] {
			seen[name] = true
			if len(linkTarget(name)) > shortSymlinkLen {
				n += page
			}
		}
	}
	return n
}

// freeBytes is the space left on the filesystem of dir.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return int64(st.Bavail) * st.Bsize, nil //nolint:gosec // G115: a tmpfs's free blocks fit in int64.
}

// makeRoom removes retired generations still within their grace period when
// the filesystem of dir lacks the need bytes a new generation takes. The
// cap of a volume is sized for two generations, the current one and the
// new one; a fast run of refreshes can leave more behind, and a refresh must
// not fail for them.
func makeRoom(dir, current string, need int64) error {
	free, err := freeBytes(dir)
	if err != nil || free >= need {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var retired []string
	for _, e := range entries {
		if e.IsDir() && isGeneration(e.Name()) && e.Name() != current {
			retired = append(retired, e.Name())
		}
	}
	if len(retired) == 0 {
		return nil
	}
	klog.V(2).InfoS("removing retired generations early to make room", "targetPath", dir, "generations", len(retired))
	if err := removeEntries(dir, retired); err != nil {
		return fmt.Errorf("make room for a new generation: %w", err)
	}
	return nil
}

// ErrNoSpace is wrapped when a generation does not fit into the volume.
var ErrNoSpace = errors.New("no space left in the volume")
