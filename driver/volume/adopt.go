package volume

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/keymount/keymount/driver/targetpath"
)

// A volume mounted by the upstream Secrets Store CSI Driver before the
// switch to keymount is a tmpfs mounted right at the target, its files in
// the same ..data layout keymount writes (or, from a provider that writes
// its own files, plain files). Running containers hold that mount, so
// keymount adopts it in place: it writes into that tmpfs and never stacks a
// mount of its own over it. The record (Record.Adopted) names the tmpfs by
// its device, so that later calls act only on that very mount; the
// volume's directory in the state directory then holds the record only.

// Adoption describes a target that may be a volume of the upstream driver.
type Adoption struct {
	// Device is the tmpfs's device.
	Device uint64
	// UpstreamLayout says the tmpfs holds a ..data symlink to a ..
	// generation directory: the layout the upstream driver writes.
	UpstreamLayout bool
}

// Adoptable returns what a target shows when it is a whole tmpfs mounted
// right at it (the root of its file system, not a bind of a directory
// such as keymount's own volumes); nil otherwise. Nothing is changed.
func (m *Manager) Adoptable(t *targetpath.Target) (*Adoption, error) {
	f, err := t.Open(false)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	root, err := isMountRoot(int(f.Fd()), "")
	if err != nil || !root {
		return nil, err
	}
	dev, ok, err := tmpfsDevice(f)
	if err != nil || !ok {
		return nil, err
	}
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(t.Path))
	if err != nil {
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	if len(ms) == 0 || ms[len(ms)-1].Root != "/" {
		return nil, nil // a bind of part of a file system: not an upstream volume
	}
	gen, err := os.Readlink(filepath.Join(targetpath.ProcPath(f), "..data"))
	upstream := err == nil && strings.HasPrefix(gen, "..") && !strings.Contains(gen, "/") && gen != "..data"
	return &Adoption{Device: dev, UpstreamLayout: upstream}, nil
}

// tmpfsDevice returns the device of the file system of f when it is a tmpfs.
func tmpfsDevice(f *os.File) (uint64, bool, error) {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &sfs); err != nil {
		return 0, false, fmt.Errorf("statfs %s: %w", f.Name(), err)
	}
	if sfs.Type != unix.TMPFS_MAGIC {
		return 0, false, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, false, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	return st.Dev, true, nil
}

// OpenAdopted opens the adopted tmpfs at the target, checking that the
// target still shows that very mount (device dev, a mount root); anything
// else fails with ErrTargetInUse. Write into it through
// the path the returned directory resolves to.
func (m *Manager) OpenAdopted(t *targetpath.Target, dev uint64) (*os.File, error) {
	f, err := t.Open(false)
	if err != nil {
		return nil, err
	}
	root, err := isMountRoot(int(f.Fd()), "")
	if err == nil && !root {
		err = fmt.Errorf("%w: %s no longer shows the adopted volume: it is not a mount point", ErrTargetInUse, t.Path)
	}
	if err == nil {
		got, ok, serr := tmpfsDevice(f)
		switch {
		case serr != nil:
			err = serr
		case !ok || got != dev:
			err = fmt.Errorf("%w: %s no longer shows the adopted volume (device %d)", ErrTargetInUse, t.Path, dev)
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// UnmountAdopted unmounts the adopted tmpfs at the target and removes the
// target directory, but only when the target shows that very mount;
// anything else is left and reported with unmounted=false.
func (m *Manager) UnmountAdopted(t *targetpath.Target, dev uint64) (unmounted bool, err error) {
	f, err := m.OpenAdopted(t, dev)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrTargetInUse) || errors.Is(err, targetpath.ErrSymlink) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	err = unix.Unmount(targetpath.ProcPath(f), unix.MNT_DETACH)
	_ = f.Close()
	if err != nil {
		return false, fmt.Errorf("unmount adopted volume at %s: %w", t.Path, err)
	}
	return true, t.RemoveDir()
}

// PrepareAdopted creates the volume's directory in the state directory, for
// the record of an adopted volume (no tmpfs of its own).
func (m *Manager) PrepareAdopted(v *Volume) error {
	if err := os.MkdirAll(v.Dir, 0o700); err != nil {
		return fmt.Errorf("create volume dir: %w", err)
	}
	return nil
}

// RemoveAdopted removes the directory of an adopted volume and its record.
// A directory with a tmpfs mounted is not touched.
func (m *Manager) RemoveAdopted(v *Volume) error {
	m.forget(v.ID)
	mounted, err := m.Mounted(v)
	if err != nil || mounted {
		return err
	}
	if err := os.RemoveAll(v.Dir); err != nil {
		return fmt.Errorf("remove adopted volume dir: %w", err)
	}
	return nil
}

// holdsAdoptedRecord reports whether dir (a volume directory without a
// tmpfs) holds the record of an adopted volume, which the start-up
// clean-up must keep.
// adoptedStillMounted reports whether dir holds the record of an adopted
// volume whose tmpfs (its recorded device) is still mounted at its target,
// by the mount table at (mount point → devices).
func adoptedStillMounted(dir string, at map[string][][2]int) bool {
	data, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return false
	}
	var r struct {
		Adopted    bool   `json:"adopted"`
		TargetPath string `json:"targetPath"`
		Device     uint64 `json:"adoptedDevice"`
	}
	if json.Unmarshal(data, &r) != nil || !r.Adopted {
		return false
	}
	for _, dev := range at[r.TargetPath] {
		if unix.Mkdev(uint32(dev[0]), uint32(dev[1])) == r.Device { //nolint:gosec // G115: device numbers are small and non-negative
			return true
		}
	}
	return false
}

func holdsAdoptedRecord(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return false
	}
	var r struct {
		Adopted bool `json:"adopted"`
	}
	return json.Unmarshal(data, &r) == nil && r.Adopted
}
