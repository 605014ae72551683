package harness

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// Mounts returns the mounts at path or below it, in mount table order.
func Mounts(path string) ([]*mountinfo.Info, error) {
	return mountinfo.GetMounts(mountinfo.PrefixFilter(path))
}

// MountAt returns the topmost mount whose mount point is exactly path, nil
// when path is not a mount point.
func MountAt(path string) (*mountinfo.Info, error) {
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(path))
	if err != nil || len(ms) == 0 {
		return nil, err
	}
	return topmost(ms), nil
}

// topmost picks, among mounts stacked on one mount point, the one no other
// is mounted on.
func topmost(ms []*mountinfo.Info) *mountinfo.Info {
	parents := make(map[int]bool, len(ms))
	for _, m := range ms {
		parents[m.Parent] = true
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if !parents[ms[i].ID] {
			return ms[i]
		}
	}
	return ms[len(ms)-1]
}

// HasOption reports whether a mount's per-mount options include opt ("ro").
func HasOption(m *mountinfo.Info, opt string) bool {
	for _, o := range strings.Split(m.Options, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// UnmountAll detaches every mount at dir or below it, deepest first, and
// returns how many it unmounted. It repeats until the mount table shows none
// left, so stacked mounts go too.
func UnmountAll(dir string) (int, error) {
	n := 0
	for range 16 {
		ms, err := Mounts(dir)
		if err != nil {
			return n, fmt.Errorf("read mount table: %w", err)
		}
		if len(ms) == 0 {
			return n, nil
		}
		sort.SliceStable(ms, func(i, j int) bool {
			di, dj := strings.Count(ms[i].Mountpoint, "/"), strings.Count(ms[j].Mountpoint, "/")
			if di != dj {
				return di > dj
			}
			return ms[i].ID > ms[j].ID
		})
		for _, m := range ms {
			err := unix.Unmount(m.Mountpoint, unix.MNT_DETACH)
			switch {
			case err == nil:
				n++
			case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
				// Gone with a parent that was detached first.
			default:
				return n, fmt.Errorf("unmount %s: %w", m.Mountpoint, err)
			}
		}
	}
	return n, fmt.Errorf("mounts still left under %s after repeated unmounting", dir)
}
