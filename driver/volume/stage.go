package volume

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/keymount/keymount/driver/targetpath"
)

// ErrStagedFile is wrapped when a provider that writes its own files left
// something in the volume that is not a regular file or a directory.
var ErrStagedFile = errors.New("provider wrote an entry that is not a regular file")

// StagedFile is a file a provider wrote into the target itself.
type StagedFile struct {
	Path     string // relative, slash-separated
	Mode     os.FileMode
	Contents []byte
}

// Stage is a writable tmpfs mounted over a target for one provider call:
// a provider in the legacy mode of the provider contract writes the files
// of the volume into target_path itself (the existing AWS provider's
// default). The pod never sees it: its containers hold the mount the target
// showed when they started (the volume's read-only bind), and a first
// publish stages before any container exists. Finish reads what the
// provider wrote and unmounts the stage, so the files reach the pod only
// through the volume's atomic write.
type Stage struct {
	m      *Manager
	target *targetpath.Target
	root   *os.File // the stage's root, for reading and for identifying it
}

// Stage mounts a fresh tmpfs, as large as one generation of the volume,
// over the target (creating the target directory when it is missing).
func (m *Manager) Stage(t *targetpath.Target) (*Stage, error) {
	dst, err := t.Open(true)
	if err != nil {
		return nil, err
	}
	defer func() { _ = dst.Close() }()
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("stage %s: fsopen tmpfs: %w", t.Path, err)
	}
	defer func() { _ = unix.Close(fsfd) }()
	// The source marks it as the driver's: a stage a killed call left on a
	// target is recognised and removed (ClearTarget, RemoveOrphans).
	for k, v := range map[string]string{"size": strconv.FormatInt(m.sizeBytes+slackBytes, 10), "mode": "0755", "source": m.stageSource()} {
		if err := unix.FsconfigSetString(fsfd, k, v); err != nil {
			return nil, fmt.Errorf("stage %s: tmpfs %s=%s: %w", t.Path, k, v, err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("stage %s: create tmpfs: %w", t.Path, err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return nil, fmt.Errorf("stage %s: fsmount: %w", t.Path, err)
	}
	root := os.NewFile(uintptr(mfd), "stage of "+t.Path)
	if err := unix.MoveMount(mfd, "", int(dst.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		_ = root.Close()
		return nil, fmt.Errorf("stage %s: attach a writable tmpfs for the provider: %w", t.Path, err)
	}
	return &Stage{m: m, target: t, root: root}, nil
}

// Finish reads every file the provider wrote (at most one generation of the
// volume: the stage's size) and unmounts the stage, also when reading
// failed. readErr says why the files could not be read (a symlink, device,
// socket or FIFO in the stage wraps ErrStagedFile: the volume holds regular
// files only); err says that the stage could not be unmounted.
func (s *Stage) Finish() (files []StagedFile, readErr, err error) {
	files, readErr = readTree(int(s.root.Fd()), "")
	err = s.unmount()
	_ = s.root.Close()
	return files, readErr, err
}

// unmount detaches the stage from the target, but only when the target's
// topmost mount is the stage.
func (s *Stage) unmount() error {
	f, err := s.target.Open(false)
	if err != nil {
		return fmt.Errorf("unstage %s: %w", s.target.Path, err)
	}
	defer func() { _ = f.Close() }()
	var top, stage unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &top); err != nil {
		return fmt.Errorf("unstage %s: %w", s.target.Path, err)
	}
	if err := unix.Fstat(int(s.root.Fd()), &stage); err != nil {
		return fmt.Errorf("unstage %s: %w", s.target.Path, err)
	}
	if top.Dev != stage.Dev || top.Ino != stage.Ino {
		return fmt.Errorf("unstage %s: the target no longer shows the provider's stage: %w", s.target.Path, ErrTargetInUse)
	}
	if err := unix.Unmount(targetpath.ProcPath(f), unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unstage %s: %w", s.target.Path, err)
	}
	return nil
}

// readTree reads the regular files below directory dirfd/rel, without
// following any symlink.
func readTree(rootfd int, rel string) ([]StagedFile, error) {
	name := rel
	if name == "" {
		name = "."
	}
	dfd, err := unix.Openat2(rootfd, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return nil, fmt.Errorf("read the provider's directory %q: %w", name, err)
	}
	dir := os.NewFile(uintptr(dfd), name)
	defer func() { _ = dir.Close() }()
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read the provider's directory %q: %w", name, err)
	}
	var out []StagedFile
	for _, e := range entries {
		p := path.Join(rel, e.Name())
		switch {
		case e.IsDir():
			sub, err := readTree(rootfd, p)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		case e.Type().IsRegular():
			f, err := readStaged(rootfd, p)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		default:
			return nil, fmt.Errorf("%w: %s is a %s", ErrStagedFile, p, e.Type())
		}
	}
	return out, nil
}

func readStaged(rootfd int, p string) (StagedFile, error) {
	fd, err := unix.Openat2(rootfd, p, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return StagedFile{}, fmt.Errorf("read the provider's file %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return StagedFile{}, fmt.Errorf("read the provider's file %s: %w", p, err)
	}
	if !info.Mode().IsRegular() {
		return StagedFile{}, fmt.Errorf("%w: %s is a %s", ErrStagedFile, p, info.Mode().Type())
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return StagedFile{}, fmt.Errorf("read the provider's file %s: %w", p, err)
	}
	return StagedFile{Path: p, Mode: info.Mode().Perm(), Contents: data}, nil
}
