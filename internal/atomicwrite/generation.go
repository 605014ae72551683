package atomicwrite

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// dirMode is the mode of the generation directory and its sub-directories.
	dirMode os.FileMode = 0o755
	// generationTimeFormat starts a generation name, after reservedPrefix.
	generationTimeFormat = "2006_01_02_15_04_05.000000000"
)

// writeGeneration writes files into a new generation directory of dir, every
// directory and file in group gid (keepGroup: the writer's), and returns its
// name. On failure nothing of the generation is left behind.
func writeGeneration(dir string, files []File, gid int) (string, error) {
	gen, err := makeGeneration(dir, gid)
	if err != nil {
		return "", err
	}
	if err := fillGeneration(filepath.Join(dir, gen), files, gid); err != nil {
		if errors.Is(err, unix.ENOSPC) {
			err = fmt.Errorf("%w: %w", ErrNoSpace, err)
		}
		return "", errors.Join(err, os.RemoveAll(filepath.Join(dir, gen)))
	}
	return gen, nil
}

// makeGeneration creates a new, empty generation directory in dir. MkdirTemp
// adds a random suffix and fails rather than reuse an existing name.
func makeGeneration(dir string, gid int) (string, error) {
	prefix := reservedPrefix + time.Now().UTC().Format(generationTimeFormat) + "."
	genPath, err := os.MkdirTemp(dir, prefix)
	if err != nil {
		return "", fmt.Errorf("create generation directory: %w", err)
	}
	if gid != keepGroup {
		if err := os.Lchown(genPath, -1, gid); err != nil {
			return "", errors.Join(fmt.Errorf("set the group of the generation directory: %w", err), os.Remove(genPath))
		}
	}
	if err := os.Chmod(genPath, dirMode); err != nil {
		return "", errors.Join(fmt.Errorf("create generation directory: %w", err), os.Remove(genPath))
	}
	return filepath.Base(genPath), nil
}

// fillGeneration writes files under genPath. All access goes through an
// os.Root, and every directory and file is created exclusively, so no
// existing entry, and no symlink, is ever followed.
func fillGeneration(genPath string, files []File, gid int) error {
	root, err := os.OpenRoot(genPath)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	made := make(map[string]bool)
	for _, f := range files {
		if err := makeParents(root, path.Dir(f.Path), gid, made); err != nil {
			return err
		}
		if err := writeFile(root, f, gid); err != nil {
			return err
		}
	}
	return nil
}

// makeParents creates directory d and its missing parents inside root, in
// group gid.
func makeParents(root *os.Root, d string, gid int, made map[string]bool) error {
	if d == "." || made[d] {
		return nil
	}
	if err := makeParents(root, path.Dir(d), gid, made); err != nil {
		return err
	}
	if err := root.Mkdir(d, dirMode); err != nil {
		return fmt.Errorf("create directory %q: %w", d, err)
	}
	if gid != keepGroup {
		if err := root.Lchown(d, -1, gid); err != nil {
			return fmt.Errorf("set the group of directory %q: %w", d, err)
		}
	}
	if err := root.Chmod(d, dirMode); err != nil {
		return fmt.Errorf("chmod directory %q: %w", d, err)
	}
	made[d] = true
	return nil
}

// writeFile creates f inside root, in group gid, and sets its mode on the
// open file, so the umask does not matter. The mode is set after the group:
// a chown may clear mode bits.
func writeFile(root *os.Root, f File, gid int) error {
	out, err := root.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.Mode)
	if err != nil {
		return fmt.Errorf("create file %q: %w", f.Path, err)
	}
	_, err = out.Write(f.Contents)
	if err == nil && gid != keepGroup {
		err = out.Chown(-1, gid)
	}
	if err == nil {
		err = out.Chmod(f.Mode)
	}
	if closeErr := out.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("write file %q: %w", f.Path, err)
	}
	return nil
}

// retire records in the mtime of generation gen that ..data stopped naming it
// now. The symlink itself would be touched, never what it points to.
func retire(dir, gen string) error {
	if gen == "" {
		return nil
	}
	now := unix.NsecToTimespec(time.Now().UnixNano())
	p := filepath.Join(dir, gen)
	err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{now, now}, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "retire generation", Path: p, Err: err}
	}
	return nil
}
