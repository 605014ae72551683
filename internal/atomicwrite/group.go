package atomicwrite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// keepGroup makes Write leave groups as the kernel gives them: the
// writer's own group. It is never a real group ID.
const keepGroup = -1

// maxGroup is the largest group ID WriteGroup accepts, the largest a pod's
// fsGroup may be.
const maxGroup = 1<<31 - 1

// ErrInvalidGroup is wrapped when WriteGroup is given a group ID outside 0
// to 2147483647.
var ErrInvalidGroup = errors.New("invalid group ID")

// inGroup reports whether fi belongs to group gid; always true for keepGroup.
func inGroup(fi fs.FileInfo, gid int) bool {
	if gid == keepGroup {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int64(st.Gid) == int64(gid)
}

// setDirGroup gives dir itself group gid, unless it has it already. dir is
// never followed when it is a symlink. Nothing happens for keepGroup.
func setDirGroup(dir string, gid int) error {
	if gid == keepGroup {
		return nil
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %q is not a directory", ErrConflict, dir)
	}
	if inGroup(fi, gid) {
		return nil
	}
	if err := os.Lchown(dir, -1, gid); err != nil {
		return fmt.Errorf("set the group of the volume directory: %w", err)
	}
	return nil
}
