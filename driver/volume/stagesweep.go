package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/driver/targetpath"
)

// maxStacked bounds how many mounts removeStage peels off one stage
// directory (a stage is one mount; more would be someone else's doing).
const maxStacked = 8

// RemoveStages unmounts and removes every stage in the pod volume
// directory of target t: what a driver killed during a provider call left
// there. It returns how many it removed; a missing directory holds none.
// Kubelet removes the volume directory after a successful unpublish and
// fails to while anything is left in it, so unpublish calls this first.
func (m *Manager) RemoveStages(t *targetpath.Target) (int, error) {
	parent, err := t.OpenParent()
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("remove stages beside %s: %w", t.Path, err)
	}
	defer func() { _ = parent.Close() }()
	n, err := removeStagesIn(parent)
	if err != nil {
		return n, fmt.Errorf("remove stages beside %s: %w", t.Path, err)
	}
	return n, nil
}

// RemoveOrphanStages removes the stages in every pod volume directory
// below the kubelet root, at start-up: a driver killed during a provider
// call leaves its stage mounted, and no call is running now that could
// own one. It returns how many it removed.
func (m *Manager) RemoveOrphanStages(kubeletRoot string) (int, error) {
	pods, err := os.ReadDir(filepath.Join(kubeletRoot, "pods"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list pods: %w", err)
	}
	removed := 0
	var errs []error
	for _, pod := range pods {
		csiDir := filepath.Join(kubeletRoot, "pods", pod.Name(), "volumes", "kubernetes.io~csi")
		vols, err := os.ReadDir(csiDir)
		if err != nil {
			continue // not a pod with CSI volumes
		}
		for _, vol := range vols {
			t, err := targetpath.Parse(kubeletRoot, filepath.Join(csiDir, vol.Name(), "mount"), pod.Name())
			if err != nil {
				continue
			}
			n, err := m.RemoveStages(t)
			removed += n
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return removed, errors.Join(errs...)
}

// removeStagesIn removes every entry named like a stage in the directory
// parent.
func removeStagesIn(parent *os.File) (int, error) {
	dfd, err := openBeneath(parent, ".", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return 0, err
	}
	dir := os.NewFile(uintptr(dfd), parent.Name())
	names, err := dir.Readdirnames(-1)
	_ = dir.Close()
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, name := range names {
		if !strings.HasPrefix(name, StagePrefix) {
			continue
		}
		if err := removeStage(parent, name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
		klog.InfoS("removed a provider stage left by an earlier call", "dir", filepath.Join(parent.Name(), name))
	}
	return removed, errors.Join(errs...)
}

// removeStage unmounts whatever is mounted at parent/name (a stage is one
// tmpfs) and removes it with whatever is in it, following no symlink.
func removeStage(parent *os.File, name string) error {
	for range maxStacked {
		fd, err := openBeneath(parent, name, unix.O_PATH)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("open %s: %w", name, err)
		}
		root, err := isMountRoot(fd, "")
		if err == nil && root {
			err = unix.Unmount(procFd(fd), unix.MNT_DETACH)
		}
		_ = unix.Close(fd)
		if err != nil {
			return fmt.Errorf("unmount %s: %w", name, err)
		}
		if !root {
			return removeBeneath(parent, name)
		}
	}
	return fmt.Errorf("%s still shows a mount after %d unmounts", name, maxStacked)
}

// removeBeneath removes parent/name and everything below it: a stage whose
// tmpfs is gone is an empty directory, unless a provider call that
// outlived the driver wrote into it.
func removeBeneath(parent *os.File, name string) error {
	r, err := os.OpenRoot(procFd(int(parent.Fd())))
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	if err := r.RemoveAll(name); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

func procFd(fd int) string {
	return "/proc/self/fd/" + fmt.Sprint(fd)
}
