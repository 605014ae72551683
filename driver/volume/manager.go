package volume

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"
)

// ErrNotFound is returned for a volume the node does not hold.
var ErrNotFound = errors.New("volume not found")

// DefaultSizeBytes caps a volume's tmpfs when the operator sets no size.
// Secrets are small; a refresh needs room for two generations at once.
const DefaultSizeBytes = 32 << 20

// Volume is one mounted secrets volume.
type Volume struct {
	// ID is the CSI volume ID.
	ID string
	// Dir is the private tmpfs mount point holding data/ and the record.
	Dir string
	// DataDir is the directory bind-mounted onto the target path.
	DataDir string
	// Target is the CSI target path the pod sees.
	Target string
}

// Manager mounts and unmounts volumes under a state directory.
type Manager struct {
	root      string
	sizeBytes int64
	mounter   mount.Interface
}

// NewManager returns a Manager keeping volumes under stateDir/volumes.
func NewManager(stateDir string, sizeBytes int64, mounter mount.Interface) (*Manager, error) {
	if !filepath.IsAbs(stateDir) {
		return nil, fmt.Errorf("state dir %q must be an absolute path", stateDir)
	}
	if sizeBytes <= 0 {
		return nil, fmt.Errorf("tmpfs size %d must be positive", sizeBytes)
	}
	root := filepath.Join(stateDir, "volumes")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	return &Manager{root: root, sizeBytes: sizeBytes, mounter: mounter}, nil
}

var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// volume returns the paths of a volume; nothing is touched.
func (m *Manager) volume(volumeID, target string) *Volume {
	name := volumeID
	if !safeName.MatchString(name) {
		sum := sha256.Sum256([]byte(volumeID))
		name = "sha256-" + hex.EncodeToString(sum[:])
	}
	dir := filepath.Join(m.root, name)
	return &Volume{ID: volumeID, Dir: dir, DataDir: filepath.Join(dir, "data"), Target: target}
}

// Ensure makes sure the volume's tmpfs is mounted and bound onto target,
// creating both when needed. created reports that the tmpfs is new (and so
// empty). A target left mounted without its tmpfs (a stale mount) is
// unmounted and bound afresh.
func (m *Manager) Ensure(volumeID, target string, readOnly bool) (v *Volume, created bool, err error) {
	v = m.volume(volumeID, target)
	mounted, err := m.isMountPoint(v.Dir)
	if err != nil {
		return nil, false, err
	}
	if !mounted {
		if err := m.mountTmpfs(v); err != nil {
			return nil, false, err
		}
		created = true
	}
	if err := m.bindTarget(v, readOnly, created); err != nil {
		if created {
			m.cleanup(v.Dir)
		}
		return nil, false, err
	}
	return v, created, nil
}

func (m *Manager) mountTmpfs(v *Volume) error {
	if err := os.MkdirAll(v.Dir, 0o700); err != nil {
		return fmt.Errorf("create volume dir: %w", err)
	}
	// mount(2) directly: starting mount(8) costs about 2 ms a call, most of
	// a first publish.
	opts := "size=" + strconv.FormatInt(m.sizeBytes, 10) + ",mode=0700"
	if err := unix.Mount("tmpfs", v.Dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs at %s: %w", v.Dir, err)
	}
	if err := os.Mkdir(v.DataDir, 0o755); err != nil { //nolint:gosec // G301: the pod, any UID, reads its volume through this directory.
		m.cleanup(v.Dir)
		return fmt.Errorf("create volume data dir: %w", err)
	}
	return nil
}

func (m *Manager) bindTarget(v *Volume, readOnly, fresh bool) error {
	mounted, err := m.isMountPoint(v.Target)
	switch {
	case errors.Is(err, os.ErrNotExist):
		mounted = false
	case mount.IsCorruptedMnt(err):
		mounted, fresh = true, true
	case err != nil:
		return err
	}
	if mounted && !fresh && bound(v) {
		return nil
	}
	if mounted {
		klog.InfoS("replacing stale mount", "targetPath", v.Target, "volumeID", v.ID)
		if err := m.mounter.Unmount(v.Target); err != nil {
			return fmt.Errorf("unmount stale target %s: %w", v.Target, err)
		}
	}
	if err := os.MkdirAll(v.Target, 0o750); err != nil {
		return fmt.Errorf("create target path: %w", err)
	}
	if err := unix.Mount(v.DataDir, v.Target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind volume onto %s: %w", v.Target, err)
	}
	if !readOnly {
		return nil
	}
	// A bind mount takes its flags from a remount.
	if err := unix.Mount("", v.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return errors.Join(fmt.Errorf("make %s read-only: %w", v.Target, err), m.mounter.Unmount(v.Target))
	}
	return nil
}

// bound reports whether the target shows the volume's data directory: the
// root of a bind mount is the very directory it binds, same device and inode.
func bound(v *Volume) bool {
	target, err := os.Stat(v.Target)
	if err != nil {
		return false
	}
	data, err := os.Stat(v.DataDir)
	return err == nil && os.SameFile(target, data)
}

// Get returns a mounted volume, or an error wrapping ErrNotFound when the
// node holds no tmpfs for volumeID or target is not bound.
func (m *Manager) Get(volumeID, target string) (*Volume, error) {
	v := m.volume(volumeID, target)
	for _, p := range []string{v.Dir, v.Target} {
		ok, err := m.isMountPoint(p)
		if errors.Is(err, os.ErrNotExist) || (err == nil && !ok) {
			return nil, fmt.Errorf("%w: %s is not mounted", ErrNotFound, p)
		}
		if err != nil {
			return nil, err
		}
	}
	if !bound(v) {
		return nil, fmt.Errorf("%w: %s does not show volume %s", ErrNotFound, v.Target, volumeID)
	}
	return v, nil
}

// Remove unmounts target and the volume's tmpfs and deletes both
// directories. It is idempotent: parts already gone are skipped, so it works
// after a driver restart and when called twice.
func (m *Manager) Remove(volumeID, target string) error {
	v := m.volume(volumeID, target)
	if err := mount.CleanupMountPoint(v.Target, m.mounter, true); err != nil {
		return fmt.Errorf("unmount target %s: %w", v.Target, err)
	}
	if err := mount.CleanupMountPoint(v.Dir, m.mounter, true); err != nil {
		return fmt.Errorf("unmount volume tmpfs %s: %w", v.Dir, err)
	}
	return nil
}

func (m *Manager) cleanup(dir string) {
	if err := mount.CleanupMountPoint(dir, m.mounter, true); err != nil {
		klog.ErrorS(err, "cleaning up volume dir", "dir", dir)
	}
}

func (m *Manager) isMountPoint(p string) (bool, error) {
	ok, err := m.mounter.IsMountPoint(p)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil && !mount.IsCorruptedMnt(err) {
		return false, fmt.Errorf("check mount point %s: %w", p, err)
	}
	return ok, err
}

// Lookup returns the paths of a volume without touching anything; its
// record says whether it was ever published.
func (m *Manager) Lookup(volumeID, target string) *Volume {
	return m.volume(volumeID, target)
}
