package volume

import (
	"fmt"
	"io"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// readTree reads the regular files below directory rootfd/rel, without
// following any symlink or leaving the stage's file system, taking their
// sizes from b (ErrStagedTooLarge when they do not fit).
func readTree(rootfd int, rel string, b *readBudget) ([]StagedFile, error) {
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
			sub, err := readTree(rootfd, p, b)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		case e.Type().IsRegular():
			f, err := readStaged(rootfd, p, b)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		default:
			return nil, fmt.Errorf("%w: %q is a %s", ErrStagedFile, p, typeName(e.Type()))
		}
	}
	return out, nil
}

// readStaged reads one regular file of the stage. Its mode is kept as
// permission bits only (set-user-ID and the like are dropped: narrower,
// never wider); a file without any permission bit is refused, because the
// volume's writer would give it the default mode 0644.
func readStaged(rootfd int, p string, b *readBudget) (StagedFile, error) {
	fd, err := unix.Openat2(rootfd, p, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return StagedFile{}, fmt.Errorf("read the provider's file %q: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	switch {
	case err != nil:
		return StagedFile{}, fmt.Errorf("read the provider's file %q: %w", p, err)
	case !info.Mode().IsRegular():
		return StagedFile{}, fmt.Errorf("%w: %q is a %s", ErrStagedFile, p, typeName(info.Mode().Type()))
	case info.Mode().Perm() == 0:
		return StagedFile{}, fmt.Errorf("%w: %q has mode 0000: give it the permission bits the pod should see", ErrStagedFile, p)
	case info.Size() > b.left:
		return StagedFile{}, b.exceeded(p)
	}
	// Read one byte more than the budget allows, so that a file that grew
	// since the stat is caught too.
	data, err := io.ReadAll(io.LimitReader(f, b.left+1))
	if err != nil {
		return StagedFile{}, fmt.Errorf("read the provider's file %q: %w", p, err)
	}
	if int64(len(data)) > b.left {
		return StagedFile{}, b.exceeded(p)
	}
	b.left -= int64(len(data))
	return StagedFile{Path: p, Mode: info.Mode().Perm(), Contents: data}, nil
}

// readBudget is what is left of the bytes a stage's files may hold.
type readBudget struct{ limit, left int64 }

func (b *readBudget) exceeded(p string) error {
	return fmt.Errorf("%w: with %q the files take more than %d bytes: "+
		"raise the driver's --provider-max-recv-size or write fewer bytes", ErrStagedTooLarge, p, b.limit)
}

func typeName(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "symlink"
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "special file (" + m.String() + ")"
}
