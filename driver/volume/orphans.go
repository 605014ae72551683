package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	mount "k8s.io/mount-utils"

	"github.com/keymount/keymount/internal/atomicwrite"
)

// mountInfoPath is this process's mount table.
const mountInfoPath = "/proc/self/mountinfo"

// RemoveOrphans unmounts and removes every volume tmpfs under the state
// directory that no other mount shows any more: its target was unmounted
// while the driver was not running (or by someone else), or a first publish
// was killed before it bound the target, so nothing can read it, and its
// secrets should not stay in memory. Directories left without a tmpfs are
// removed as well, and so are provider stages a killed call left on a
// target. A volume a target shows is repaired (atomicwrite.Repair): a write
// killed half-way leaves no dangling or temporary link. It returns how many
// mounts it removed.
func (m *Manager) RemoveOrphans() (int, error) {
	infos, err := mount.ParseMountInfo(mountInfoPath)
	if err != nil {
		return 0, fmt.Errorf("read mount table: %w", err)
	}
	// How many mounts show each device: a volume's tmpfs and every bind of
	// its data directory share one.
	uses := map[[2]int]int{}
	ours := map[string][2]int{} // volume dir -> device
	at := map[string][][2]int{} // mount point -> devices mounted there
	removed, err := m.removeStages(infos)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, mi := range infos {
		if m.isStageInfo(mi) {
			continue
		}
		dev := [2]int{mi.Major, mi.Minor}
		uses[dev]++
		at[mi.MountPoint] = append(at[mi.MountPoint], dev)
		// Every directory right under the root is a volume: keymount's own
		// ("v-<hash>"), or one of an older keymount named after its ID.
		if filepath.Dir(mi.MountPoint) == m.root {
			ours[mi.MountPoint] = dev
		}
	}
	entries, err := os.ReadDir(m.root)
	if err != nil {
		return 0, fmt.Errorf("list volumes: %w", err)
	}
	for _, e := range entries {
		dir := filepath.Join(m.root, e.Name())
		dev, mounted := ours[dir]
		switch {
		case !e.IsDir():
			continue
		case mounted && uses[dev] > 1:
			// A target still shows it: heal what a write killed half-way
			// left (links of the other generation, temporary links).
			if err := atomicwrite.Repair(filepath.Join(dir, "data")); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("repair volume %s: %w", dir, err))
			}
			continue
		case mounted:
			if err := unmount(dir); err != nil {
				errs = append(errs, fmt.Errorf("unmount orphaned volume %s: %w", dir, err))
				continue
			}
			logRemoved(dir, "no target shows it")
			removed++
		case adoptedStillMounted(dir, at):
			continue // a volume adopted from the upstream driver: its tmpfs is at the target
		case holdsAdoptedRecord(dir):
			// Adopted, but its tmpfs is gone from the target (the upstream
			// driver unpublished it after a rollback, or the node was
			// rebooted): only the record is left.
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("remove the record of a volume no longer mounted: %w", err))
			} else {
				logRemoved(dir, "an adopted volume no longer mounted at its target")
				removed++
			}
			continue
		}
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove orphaned volume dir: %w", err))
		}
	}
	return removed, errors.Join(errs...)
}

// removeStages unmounts every provider stage in the mount table: no call
// runs before start-up ends, so each is a killed call's.
func (m *Manager) removeStages(infos []mount.MountInfo) (int, error) {
	removed := 0
	var errs []error
	for _, mi := range infos {
		if !m.isStageInfo(mi) {
			continue
		}
		if err := unmount(mi.MountPoint); err != nil {
			errs = append(errs, fmt.Errorf("unmount a provider stage left at %s: %w", mi.MountPoint, err))
			continue
		}
		logRemoved(mi.MountPoint, "a provider stage of a call that did not finish")
		removed++
	}
	return removed, errors.Join(errs...)
}

func (m *Manager) isStageInfo(mi mount.MountInfo) bool {
	return mi.FsType == "tmpfs" && mi.Source == m.stageSource()
}
