package volume

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/driver/targetpath"
	"github.com/keymount/keymount/internal/killpoint"
)

var (
	// ErrNotFound is returned for a volume the node does not hold.
	ErrNotFound = errors.New("volume not found")
	// ErrTargetInUse is returned when a target path is already a mount point
	// that does not show the volume.
	ErrTargetInUse = errors.New("target path already in use")
)

// DefaultSizeBytes is the default cap of one generation of a volume's
// content, counted the way tmpfs counts it (see atomicwrite.Need): 10,000
// small files fit.
const DefaultSizeBytes = 64 << 20

// slackBytes is room beside two generations for the record and its
// temporary copy.
const slackBytes = 64 << 10

// dirPrefix starts the name of every volume directory: "v-" and the hex
// SHA-256 of the volume ID, so that two IDs never share a directory.
const dirPrefix = "v-"

// Volume is the node-side storage of one secrets volume. Its paths are
// derived from the volume ID alone.
type Volume struct {
	// ID is the CSI volume ID.
	ID string
	// Dir is the private tmpfs mount point holding data/ and the record.
	Dir string
	// DataDir is the directory bound onto the target path.
	DataDir string
}

// Manager mounts and unmounts volumes under a state directory.
type Manager struct {
	root      string
	sizeBytes int64
	records   recordCache
}

// NewManager returns a Manager keeping volumes under stateDir/volumes.
// sizeBytes caps one generation of a volume's content; each tmpfs holds two
// generations and the record.
func NewManager(stateDir string, sizeBytes int64) (*Manager, error) {
	if !filepath.IsAbs(stateDir) {
		return nil, fmt.Errorf("state dir %q must be an absolute path", stateDir)
	}
	if sizeBytes <= 0 {
		return nil, fmt.Errorf("volume size %d must be positive", sizeBytes)
	}
	root := filepath.Join(stateDir, "volumes")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	// The mount table names real paths.
	root, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("resolve state dir: %w", err)
	}
	return &Manager{root: root, sizeBytes: sizeBytes, records: recordCache{m: map[string]*cachedRecord{}}}, nil
}

// SizeBytes is the cap of one generation of a volume's content.
func (m *Manager) SizeBytes() int64 { return m.sizeBytes }

// Lookup returns the paths of a volume; nothing is touched.
func (m *Manager) Lookup(volumeID string) *Volume {
	sum := sha256.Sum256([]byte(volumeID))
	dir := filepath.Join(m.root, dirPrefix+hex.EncodeToString(sum[:]))
	return &Volume{ID: volumeID, Dir: dir, DataDir: filepath.Join(dir, "data")}
}

// Mounted reports whether the volume's tmpfs is mounted.
func (m *Manager) Mounted(v *Volume) (bool, error) {
	ok, err := isMountRoot(unix.AT_FDCWD, v.Dir)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	return ok, err
}

// MountTmpfs mounts the volume's private tmpfs, sized for two generations,
// and creates its data directory.
func (m *Manager) MountTmpfs(v *Volume) error {
	if err := os.MkdirAll(v.Dir, 0o700); err != nil {
		return fmt.Errorf("create volume dir: %w", err)
	}
	killpoint.Reached("volume.made-dir")
	// The source names the volume's directory: every bind of the tmpfs
	// shows it, so the driver knows its own binds (see ClearTarget).
	opts := "size=" + strconv.FormatInt(2*m.sizeBytes+slackBytes, 10) + ",mode=0700"
	if err := unix.Mount(v.Dir, v.Dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("mount tmpfs at %s: %w", v.Dir, err)
	}
	killpoint.Reached("volume.mounted-tmpfs")
	if err := os.Mkdir(v.DataDir, 0o755); err != nil { //nolint:gosec // G301: the pod, any UID, reads its volume through this directory.
		return errors.Join(fmt.Errorf("create volume data dir: %w", err), m.RemoveTmpfs(v))
	}
	killpoint.Reached("volume.made-data-dir")
	return nil
}

// RemoveTmpfs unmounts the volume's tmpfs and removes its directory. A
// volume already gone is not an error.
func (m *Manager) RemoveTmpfs(v *Volume) error {
	m.forget(v.ID)
	mounted, err := m.Mounted(v)
	if err != nil {
		return err
	}
	if mounted {
		if err := unmount(v.Dir); err != nil {
			return fmt.Errorf("unmount volume tmpfs %s: %w", v.Dir, err)
		}
		killpoint.Reached("volume.unmounted-tmpfs")
	}
	if err := os.Remove(v.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove volume dir: %w", err)
	}
	return nil
}

// unmount detaches the mount at p with umount(2). A lazy unmount frees the
// tmpfs as soon as nothing uses it any more, and spares the RCU grace period
// a synchronous unmount waits for (milliseconds, most of an unpublish).
func unmount(p string) error {
	return unix.Unmount(p, unix.UMOUNT_NOFOLLOW|unix.MNT_DETACH)
}

// Bind makes the target show the volume's data directory, read-only when
// asked, creating the target directory when it is missing. The bind mount
// is prepared detached and attached with its flags already set, so the pod
// never sees a writable volume. A target already showing the volume is left
// as it is; a target that is any other mount point fails with
// ErrTargetInUse and is left untouched.
//
// A mount of the driver's own that no call uses any more (see ClearTarget)
// is removed first, so a target a killed call left it on is bound again.
func (m *Manager) Bind(v *Volume, t *targetpath.Target, readOnly bool) error {
	err := m.bind(v, t, readOnly)
	if !errors.Is(err, ErrTargetInUse) {
		return err
	}
	if n, cerr := m.ClearTarget(v, t); cerr != nil || n == 0 {
		return errors.Join(err, cerr)
	}
	return m.bind(v, t, readOnly)
}

func (m *Manager) bind(v *Volume, t *targetpath.Target, readOnly bool) error {
	dst, err := t.Open(true)
	if err != nil {
		return err
	}
	defer func() { _ = dst.Close() }()
	if err := checkFree(dst, v, t); err != nil {
		return err
	}
	if same, err := v.ShownBy(dst); err != nil || same {
		return err
	}
	return attach(v.DataDir, dst, readOnly)
}

// CheckTarget returns an error wrapping ErrTargetInUse when the target is a
// mount point that does not show the volume; a missing target is free.
// Nothing is changed but mounts of the driver's own that no call uses any
// more (see ClearTarget).
func (m *Manager) CheckTarget(v *Volume, t *targetpath.Target) error {
	err := m.checkTarget(v, t)
	if !errors.Is(err, ErrTargetInUse) {
		return err
	}
	if n, cerr := m.ClearTarget(v, t); cerr != nil || n == 0 {
		return errors.Join(err, cerr)
	}
	return m.checkTarget(v, t)
}

func (m *Manager) checkTarget(v *Volume, t *targetpath.Target) error {
	f, err := t.Open(false)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	return checkFree(f, v, t)
}

func checkFree(f *os.File, v *Volume, t *targetpath.Target) error {
	root, err := isMountRoot(int(f.Fd()), "")
	if err != nil {
		return fmt.Errorf("check target %s: %w", t.Path, err)
	}
	if !root {
		return nil
	}
	if same, err := v.ShownBy(f); err == nil && same {
		return nil
	}
	return fmt.Errorf("%w: %s is already a mount point that does not show volume %s: "+
		"unpublish whatever is mounted there first", ErrTargetInUse, t.Path, v.ID)
}

// attach clones src as a detached bind mount, sets its flags and moves it
// onto dst.
func attach(src string, dst *os.File, readOnly bool) error {
	tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone %s for binding: %w", src, err)
	}
	defer func() { _ = unix.Close(tree) }()
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}
	if readOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return fmt.Errorf("set bind mount flags: %w", err)
	}
	if err := unix.MoveMount(tree, "", int(dst.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("bind volume onto %s: %w", dst.Name(), err)
	}
	killpoint.Reached("volume.bound")
	return nil
}

// BoundTo reports whether the target shows the volume's data directory.
func (m *Manager) BoundTo(v *Volume, t *targetpath.Target) (bool, error) {
	f, err := t.Open(false)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	return v.ShownBy(f)
}

// Unbind unmounts the target and removes its directory, but only when the
// target shows the volume's data directory, or a mount of the driver's own
// that no call uses any more (see ClearTarget); anything else is left as it
// is and reported with unbound=false.
func (m *Manager) Unbind(v *Volume, t *targetpath.Target) (unbound bool, err error) {
	cleared, err := m.ClearTarget(v, t)
	if err != nil {
		return false, err
	}
	unbound, err = m.unbind(v, t)
	if err != nil || unbound || cleared == 0 {
		return unbound, err
	}
	return true, t.RemoveDir()
}

func (m *Manager) unbind(v *Volume, t *targetpath.Target) (unbound bool, err error) {
	f, err := t.Open(false)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, targetpath.ErrSymlink) {
		// Nothing there, a file, or a path through a symlink: not a mount
		// of this volume, and nothing to touch.
		return false, nil
	}
	if err != nil {
		return false, err
	}
	same, err := v.ShownBy(f)
	if err != nil || !same {
		_ = f.Close()
		return false, err
	}
	// Through the descriptor, so a path swapped since the check is never
	// what gets unmounted; detached, because the descriptor itself holds
	// the mount.
	err = unix.Unmount(targetpath.ProcPath(f), unix.MNT_DETACH)
	_ = f.Close()
	if err != nil {
		return false, fmt.Errorf("unmount target %s: %w", t.Path, err)
	}
	killpoint.Reached("volume.unbound")
	return true, t.RemoveDir()
}

// Get returns a published volume, or an error wrapping ErrNotFound when the
// node holds no tmpfs for volumeID or path does not show it.
func (m *Manager) Get(volumeID, path string) (*Volume, error) {
	v := m.Lookup(volumeID)
	mounted, err := m.Mounted(v)
	if err != nil {
		return nil, err
	}
	if !mounted {
		return nil, fmt.Errorf("%w: no volume %s on this node", ErrNotFound, volumeID)
	}
	f, err := os.OpenFile(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNotFound, path, err)
	}
	defer func() { _ = f.Close() }()
	if same, err := v.ShownBy(f); err != nil || !same {
		return nil, fmt.Errorf("%w: %s does not show volume %s", ErrNotFound, path, volumeID)
	}
	return v, nil
}

// isMountRoot reports whether path (relative to dirfd; "" for dirfd itself)
// is the root of a mount. Symlinks are not followed.
func isMountRoot(dirfd int, path string) (bool, error) {
	flags := unix.AT_SYMLINK_NOFOLLOW | unix.AT_STATX_DONT_SYNC
	if path == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	var stx unix.Statx_t
	if err := unix.Statx(dirfd, path, flags, unix.STATX_TYPE|unix.STATX_INO, &stx); err != nil {
		return false, err
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, errors.New("the kernel does not report mount roots (statx STATX_ATTR_MOUNT_ROOT needs Linux 5.8)")
	}
	return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}

// ShownBy reports whether f is the volume's data directory (same device
// and inode): a target it is bound onto shows it. False when the data
// directory is gone.
func (v *Volume) ShownBy(f *os.File) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &a); err != nil {
		return false, err
	}
	if err := unix.Stat(v.DataDir, &b); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

// logRemoved is shared by the clean-up paths.
func logRemoved(dir, why string) {
	klog.InfoS("removed volume tmpfs", "dir", dir, "reason", why)
}
