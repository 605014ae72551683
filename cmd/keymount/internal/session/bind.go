package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/keymount/keymount/driver/volume"
)

// ErrTargetInUse is wrapped when the user's target is a mount point that
// does not show the session's volume: it is left alone.
var ErrTargetInUse = errors.New("target is a mount point not made by keymount")

// Bind shows the volume published for pod at the user's target: a bind
// mount of its private kubelet target, prepared detached and attached
// read-only (nosuid, nodev, noexec), so the target is never writable. The
// target directory is created when missing. A target already showing the
// volume is left as it is; a target that is another mount point fails with
// ErrTargetInUse.
func (s *Session) Bind(pod Pod, target string) error {
	kt := s.KubeletTarget(pod.UID, target)
	v := s.volumes.Lookup(VolumeID(target))
	if ok, err := sameDir(kt, v); err != nil || !ok {
		return errors.Join(err, fmt.Errorf("the volume is not published at %s", kt))
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return fmt.Errorf("create target: %w", err)
	}
	dst, err := openDir(target)
	if err != nil {
		return err
	}
	defer func() { _ = dst.Close() }()
	if shows, err := v.ShownBy(dst); err != nil || shows {
		return err
	}
	if root, err := isMountRoot(dst); err != nil || root {
		return errors.Join(err, fmt.Errorf("%w: %s", ErrTargetInUse, target))
	}
	return attachReadOnly(kt, dst)
}

// Unbind unmounts the user's target and removes its directory when it
// shows the session's volume. A target that does not exist, or is a plain
// directory, is left as it is and reported with unbound=false; a target
// that is another mount point fails with ErrTargetInUse.
func (s *Session) Unbind(target string) (unbound bool, err error) {
	v := s.volumes.Lookup(VolumeID(target))
	f, err := openDir(target)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	shows, err := v.ShownBy(f)
	if err == nil && !shows {
		var root bool
		if root, err = isMountRoot(f); err == nil && root {
			err = fmt.Errorf("%w: %s", ErrTargetInUse, target)
		}
	}
	if err != nil || !shows {
		_ = f.Close()
		return false, err
	}
	// Through the descriptor, so a path swapped since the check is never
	// what gets unmounted; detached, because the descriptor holds the mount.
	err = unix.Unmount(procPath(f), unix.MNT_DETACH)
	_ = f.Close()
	if err != nil {
		return false, fmt.Errorf("unmount %s: %w", target, err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return true, fmt.Errorf("remove target: %w", err)
	}
	return true, nil
}

// attachReadOnly clones the mount at src detached, makes it read-only and
// moves it onto dst.
func attachReadOnly(src string, dst *os.File) error {
	tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return fmt.Errorf("clone %s for binding: %w", src, err)
	}
	defer func() { _ = unix.Close(tree) }()
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return fmt.Errorf("make the bind mount read-only: %w", err)
	}
	if err := unix.MoveMount(tree, "", int(dst.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("bind the volume onto %s: %w", dst.Name(), err)
	}
	return nil
}

// openDir opens the directory at p with O_PATH, not following a symlink
// at p itself.
func openDir(p string) (*os.File, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Clean(p)), nil
}

// sameDir reports whether the directory at p shows the volume v.
func sameDir(p string, v *volume.Volume) (bool, error) {
	f, err := openDir(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	return v.ShownBy(f)
}

// isMountRoot reports whether f is the root of a mount.
func isMountRoot(f *os.File) (bool, error) {
	var stx unix.Statx_t
	flags := unix.AT_EMPTY_PATH | unix.AT_SYMLINK_NOFOLLOW | unix.AT_STATX_DONT_SYNC
	if err := unix.Statx(int(f.Fd()), "", flags, unix.STATX_TYPE, &stx); err != nil {
		return false, fmt.Errorf("statx %s: %w", f.Name(), err)
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, errors.New("the kernel does not report mount roots (statx STATX_ATTR_MOUNT_ROOT needs Linux 5.8)")
	}
	return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}

// procPath is the path through which the kernel reaches the file f is open
// on, for umount(2).
func procPath(f *os.File) string {
	return fmt.Sprintf("/proc/self/fd/%d", f.Fd())
}
