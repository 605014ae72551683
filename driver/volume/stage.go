package volume

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/keymount/keymount/driver/targetpath"
)

var (
	// ErrStagedFile is wrapped when a provider that writes its own files
	// left something in its stage that the volume cannot hold: a symlink,
	// device, socket or FIFO, or a file nobody may read.
	ErrStagedFile = errors.New("provider wrote an entry that is not a regular file")
	// ErrStagedTooLarge is wrapped when a provider that writes its own
	// files wrote more bytes than a provider response may carry.
	ErrStagedTooLarge = errors.New("provider wrote more than a response may carry")
)

// StagePrefix starts the name of every stage directory. Stages live in the
// pod volume's kubelet directory, beside the target
// (<kubelet root>/pods/<uid>/volumes/kubernetes.io~csi/<volume>/), where
// kubelet keeps nothing of that name: whatever carries it there is the
// driver's own, and is removed by RemoveStages.
const StagePrefix = "keymount-stage-"

// StagedFile is a file a provider wrote into its stage, or a file of the
// volume copied into the stage before the call.
type StagedFile struct {
	Path     string // relative, slash-separated
	Mode     os.FileMode
	Contents []byte
}

// Stage is a writable tmpfs for one call of a provider in the legacy mode
// of the provider contract, which writes the volume's files into
// target_path itself and reads back from there the files of objects that
// did not change (the existing AWS provider's default). It is mounted in
// the pod volume's kubelet directory beside the target, never at or over
// the target: the pod's target shows the volume, read-only, at every
// instant, and a container that starts during the call bind-mounts the
// volume, not the stage. Providers reach it the way they reach targets
// (they mount <kubelet root>/pods with HostToContainer propagation).
//
// The stage starts with a copy of the volume's current files, so the
// provider finds unchanged files where it expects them. Finish reads what
// the provider left there, unmounts and removes the stage; the files reach
// the pod only through the volume's atomic write.
type Stage struct {
	target *targetpath.Target
	name   string   // the stage directory's name in the volume directory
	root   *os.File // the stage's root, for reading and for identifying it
	// Path is the stage's absolute path: the target_path of the call.
	Path string
}

// Stage mounts a fresh tmpfs beside the target (in the pod volume's
// directory, which it creates with the target when they are missing, as
// kubelet does), holding a copy of current, and returns it. Stages left
// there by an earlier call (a driver killed during the call) are removed
// first. The tmpfs is filled while it is still detached, so the provider
// never sees part of the copy.
func (m *Manager) Stage(t *targetpath.Target, current []StagedFile) (*Stage, error) {
	tf, err := t.Open(true)
	if err != nil {
		return nil, err
	}
	_ = tf.Close()
	parent, err := t.OpenParent()
	if err != nil {
		return nil, err
	}
	defer func() { _ = parent.Close() }()
	if _, err := removeStagesIn(parent); err != nil {
		return nil, fmt.Errorf("stage for %s: %w", t.Path, err)
	}
	root, err := m.stageTmpfs()
	if err != nil {
		return nil, fmt.Errorf("stage for %s: %w", t.Path, err)
	}
	if err := populate(int(root.Fd()), current); err != nil {
		_ = root.Close()
		return nil, fmt.Errorf("stage for %s: copy the volume's files: %w", t.Path, err)
	}
	name, err := attachStage(parent, root)
	if err != nil {
		_ = root.Close()
		return nil, fmt.Errorf("stage for %s: %w", t.Path, err)
	}
	return &Stage{target: t, name: name, root: root, Path: filepath.Join(filepath.Dir(t.Path), name)}, nil
}

// stageTmpfs creates a detached tmpfs as large as the volume's own (two
// generations: a copy of the current one and what the provider writes
// beside it before its renames), with as many inodes as that many pages.
func (m *Manager) stageTmpfs() (*os.File, error) {
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fsopen tmpfs: %w", err)
	}
	defer func() { _ = unix.Close(fsfd) }()
	size := 2*m.sizeBytes + slackBytes
	inodes := size/int64(os.Getpagesize()) + stageSpareInodes
	for _, kv := range [][2]string{
		{"size", strconv.FormatInt(size, 10)}, {"nr_inodes", strconv.FormatInt(inodes, 10)}, {"mode", "0755"},
		// The source marks it as the driver's: a stage a killed call left
		// behind is recognised and removed (ClearTarget, RemoveOrphans).
		{"source", m.stageSource()},
	} {
		if err := unix.FsconfigSetString(fsfd, kv[0], kv[1]); err != nil {
			return nil, fmt.Errorf("tmpfs %s=%s: %w", kv[0], kv[1], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("create tmpfs: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fsmount: %w", err)
	}
	return os.NewFile(uintptr(mfd), "stage"), nil
}

// stageSpareInodes is room for directories and a provider's temporary
// files beside one inode per page of the stage.
const stageSpareInodes = 1024

// attachStage makes a stage directory with a fresh random name in the
// volume directory and moves the detached tmpfs onto it. A random name per
// call means a provider call that outlived its deadline can never write
// into a later call's stage.
func attachStage(parent, root *os.File) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	name := StagePrefix + hex.EncodeToString(b[:])
	if err := unix.Mkdirat(int(parent.Fd()), name, 0o750); err != nil {
		return "", fmt.Errorf("create the stage directory %s: %w", name, err)
	}
	dst, err := openBeneath(parent, name, unix.O_PATH|unix.O_DIRECTORY)
	if err == nil {
		err = unix.MoveMount(int(root.Fd()), "", dst, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
		_ = unix.Close(dst)
	}
	if err != nil {
		_ = unix.Unlinkat(int(parent.Fd()), name, unix.AT_REMOVEDIR)
		return "", fmt.Errorf("attach a writable tmpfs for the provider at %s: %w", name, err)
	}
	return name, nil
}

// populate copies files into the directory rootfd: regular files with
// their modes, their directories 0755. The paths come from the volume's
// own generation (validated when it was written); no symlink is followed.
func populate(rootfd int, files []StagedFile) error {
	for _, f := range files {
		if err := mkdirAllBeneath(rootfd, path.Dir(f.Path)); err != nil {
			return err
		}
		fd, err := unix.Openat2(rootfd, f.Path, &unix.OpenHow{
			Flags:   unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Mode:    0o600,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV,
		})
		if err != nil {
			return fmt.Errorf("create %s: %w", f.Path, err)
		}
		file := os.NewFile(uintptr(fd), f.Path)
		_, err = file.Write(f.Contents)
		err = errors.Join(err, file.Chmod(f.Mode.Perm()), file.Close())
		if err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	return nil
}

func mkdirAllBeneath(rootfd int, dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	if err := mkdirAllBeneath(rootfd, path.Dir(dir)); err != nil {
		return err
	}
	parent, err := openBeneathFd(rootfd, path.Dir(dir), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("open %s: %w", path.Dir(dir), err)
	}
	defer func() { _ = unix.Close(parent) }()
	if err := unix.Mkdirat(parent, path.Base(dir), 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}

// Finish reads every regular file the provider left in the stage (at most
// maxBytes of contents: a provider response's limit) and unmounts and
// removes the stage, also when reading failed. readErr says why the files
// cannot become the volume's (wrapping ErrStagedFile or
// ErrStagedTooLarge); err says that the stage could not be removed.
func (s *Stage) Finish(maxBytes int64) (files []StagedFile, readErr, err error) {
	files, readErr = readTree(int(s.root.Fd()), "", &readBudget{limit: maxBytes, left: maxBytes})
	_ = s.root.Close()
	err = s.remove()
	return files, readErr, err
}

// Discard unmounts and removes the stage without reading it.
func (s *Stage) Discard() error {
	_ = s.root.Close()
	return s.remove()
}

// remove unmounts and removes the stage directory.
func (s *Stage) remove() error {
	parent, err := s.target.OpenParent()
	if err != nil {
		return fmt.Errorf("remove the stage %s: %w", s.Path, err)
	}
	defer func() { _ = parent.Close() }()
	if err := removeStage(parent, s.name); err != nil {
		return fmt.Errorf("remove the stage %s: %w", s.Path, err)
	}
	return nil
}

// openBeneath opens name below the directory parent without following any
// symlink or leaving parent.
func openBeneath(parent *os.File, name string, flags int) (int, error) {
	return openBeneathFd(int(parent.Fd()), name, flags)
}

func openBeneathFd(dirfd int, name string, flags int) (int, error) {
	how := &unix.OpenHow{
		Flags:   uint64(flags) | unix.O_CLOEXEC | unix.O_NOFOLLOW, //nolint:gosec // G115: open flags are positive
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(dirfd, name, how)
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}
