package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/driver/targetpath"
)

// The driver names what it mounts, so that it recognises its own mounts at
// a kubelet target from the mount table alone, after a crash or after its
// volume's tmpfs was unmounted under a live bind: the source of a volume's
// tmpfs is the volume's directory in the state directory (every bind of it
// shows that source, with root /data), and the source of a provider's
// stage is stageSource. Only root in the host's mount namespace can mount
// something with such a source at a kubelet target, and root owns the
// node's secrets anyway.

// dataRoot is the root, inside a volume's tmpfs, of the bind at its target.
const dataRoot = "/data"

// stageSource is the mount source of every provider stage of this manager.
func (m *Manager) stageSource() string {
	return filepath.Join(m.root, "stage")
}

// mountOf returns the mount table entry of the mount f is on: for a target
// opened by Target.Open, the topmost mount at the target.
func mountOf(f *os.File) (*mountinfo.Info, error) {
	var stx unix.Statx_t
	err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &stx)
	if err != nil {
		return nil, &os.PathError{Op: "statx", Path: f.Name(), Err: err}
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return nil, errors.New("the kernel does not report mount IDs (statx STATX_MNT_ID needs Linux 5.8)")
	}
	ms, err := mountinfo.GetMounts(func(i *mountinfo.Info) (skip, stop bool) {
		return uint64(i.ID) != stx.Mnt_id, uint64(i.ID) == stx.Mnt_id //nolint:gosec // G115: mount IDs are non-negative
	})
	if err != nil {
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("mount %d of %s is not in the mount table", stx.Mnt_id, f.Name())
	}
	return ms[0], nil
}

// ownBind reports whether mi is a bind of volume v's data directory: the
// volume's tmpfs, mounted or not any more in the state directory.
func ownBind(mi *mountinfo.Info, v *Volume) bool {
	return mi.FSType == "tmpfs" && mi.Source == v.Dir && mi.Root == dataRoot
}

// isStage reports whether mi is a provider stage of this manager.
func (m *Manager) isStage(mi *mountinfo.Info) bool {
	return mi.FSType == "tmpfs" && mi.Source == m.stageSource()
}

// ClearTarget unmounts from the target what the driver itself left there
// and no call of this volume uses any more: a provider's stage (a call
// killed before it unstaged; the caller holds the volume's lock, so no call
// of this target is running), and a bind of this volume whose tmpfs is no
// longer mounted in the state directory (unmounted under the live bind, or
// lost with the driver's state). Anything else is left; the target shows
// what is under. It returns how many mounts it removed.
func (m *Manager) ClearTarget(v *Volume, t *targetpath.Target) (int, error) {
	removed := 0
	for {
		f, err := t.Open(false)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, targetpath.ErrSymlink) {
			return removed, nil
		}
		if err != nil {
			return removed, err
		}
		stale, why, err := m.staleAt(f, v)
		if err == nil && stale {
			err = unix.Unmount(targetpath.ProcPath(f), unix.MNT_DETACH)
			if err == nil {
				removed++
				klog.InfoS("removed a stale mount of the driver from a target", "volumeID", v.ID, "targetPath", t.Path, "mount", why)
			}
		}
		_ = f.Close()
		if err != nil || !stale {
			return removed, err
		}
	}
}

// staleAt reports whether the topmost mount at the open target f is the
// driver's and unused: a stage, or a bind of v that does not show v's
// mounted data directory.
func (m *Manager) staleAt(f *os.File, v *Volume) (bool, string, error) {
	root, err := isMountRoot(int(f.Fd()), "")
	if err != nil || !root {
		return false, "", err
	}
	if same, err := v.ShownBy(f); err != nil || same {
		return false, "", err // the volume, live: the common case reads no mount table
	}
	mi, err := mountOf(f)
	switch {
	case err != nil:
		return false, "", err
	case m.isStage(mi):
		return true, "provider stage", nil
	case ownBind(mi, v):
		return true, "bind of a volume tmpfs no longer mounted", nil
	}
	return false, "", nil
}

// RemoveUnshown removes volume v's tmpfs when no mount but its own in the
// state directory shows it (a first publish killed before it bound the
// target), and the volume's empty directory when no tmpfs is mounted
// there. removed says a tmpfs was unmounted. A tmpfs that a target still
// shows is left.
func (m *Manager) RemoveUnshown(v *Volume) (removed bool, err error) {
	mounted, err := m.Mounted(v)
	if err != nil {
		return false, err
	}
	if !mounted {
		if err := os.Remove(v.Dir); err != nil && !errors.Is(err, os.ErrNotExist) &&
			!errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EBUSY) {
			return false, fmt.Errorf("remove volume dir: %w", err)
		}
		return false, nil
	}
	var st unix.Stat_t
	if err := unix.Stat(v.Dir, &st); err != nil {
		return false, &os.PathError{Op: "stat", Path: v.Dir, Err: err}
	}
	shows, err := mountinfo.GetMounts(func(i *mountinfo.Info) (skip, stop bool) {
		return unix.Mkdev(uint32(i.Major), uint32(i.Minor)) != st.Dev, false //nolint:gosec // G115: device numbers are small and non-negative
	})
	if err != nil {
		return false, fmt.Errorf("read the mount table: %w", err)
	}
	if len(shows) > 1 {
		return false, nil
	}
	if err := m.RemoveTmpfs(v); err != nil {
		return false, err
	}
	logRemoved(v.Dir, "no target shows it")
	return true, nil
}
