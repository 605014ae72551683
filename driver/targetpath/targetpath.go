package targetpath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultKubeletRoot is kubelet's --root-dir default.
const DefaultKubeletRoot = "/var/lib/kubelet"

// csiPluginDir is the directory kubelet keeps a pod's CSI volumes in.
const csiPluginDir = "kubernetes.io~csi"

// mountDir is the last element of every CSI target path.
const mountDir = "mount"

var (
	// ErrInvalid is wrapped by every error about the shape of a target path.
	ErrInvalid = errors.New("invalid target path")
	// ErrSymlink is wrapped when an element below the kubelet root is a symlink.
	ErrSymlink = errors.New("target path crosses a symlink")
)

// Target is a validated kubelet target path.
type Target struct {
	// Root is the kubelet root directory.
	Root string
	// PodUID and Volume are the pod and the pod volume the path belongs to.
	PodUID, Volume string
	// Path is the whole target path.
	Path string
}

// Parse checks that path is root/pods/<podUID>/volumes/kubernetes.io~csi/<volume>/mount.
// Nothing on disk is read.
func Parse(root, path, podUID string) (*Target, error) {
	if podUID == "" {
		return nil, fmt.Errorf("%w: the volume context has no pod UID: set podInfoOnMount: true in the CSIDriver object", ErrInvalid)
	}
	if !validElement(podUID) {
		return nil, fmt.Errorf("%w: pod UID %q is not a single path element", ErrInvalid, podUID)
	}
	podDir := filepath.Join(root, "pods", podUID, "volumes", csiPluginDir)
	rel, err := filepath.Rel(podDir, path)
	if err != nil || filepath.Clean(path) != path || !filepath.IsAbs(path) {
		return nil, shapeError(root, path, podUID)
	}
	volume, last, ok := strings.Cut(rel, string(filepath.Separator))
	if !ok || last != mountDir || !validElement(volume) {
		return nil, shapeError(root, path, podUID)
	}
	return &Target{Root: root, PodUID: podUID, Volume: volume, Path: path}, nil
}

func shapeError(root, path, podUID string) error {
	return fmt.Errorf("%w %q: want %s/pods/%s/volumes/%s/<volume name>/%s as kubelet sends it "+
		"(set the driver's --kubelet-root-dir when kubelet runs with another --root-dir)",
		ErrInvalid, path, root, podUID, csiPluginDir, mountDir)
}

func validElement(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

// relative is the path below the kubelet root, element by element.
func (t *Target) relative() []string {
	return []string{"pods", t.PodUID, "volumes", csiPluginDir, t.Volume, mountDir}
}

// Open returns an O_PATH descriptor of the target directory, resolved without
// following any symlink below the kubelet root. With create, missing
// directories are made (mode 0750), as kubelet would; without it a missing
// element is an error wrapping fs.ErrNotExist.
func (t *Target) Open(create bool) (*os.File, error) {
	return t.open(t.relative(), create)
}

// OpenParent returns an O_PATH descriptor of the directory holding the target.
func (t *Target) OpenParent() (*os.File, error) {
	rel := t.relative()
	return t.open(rel[:len(rel)-1], false)
}

func (t *Target) open(elems []string, create bool) (*os.File, error) {
	root, err := unix.Open(t.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open kubelet root", Path: t.Root, Err: err}
	}
	defer func() { _ = unix.Close(root) }()
	fd, err := openBeneath(root, filepath.Join(elems...))
	if err == nil || !create || !errors.Is(err, unix.ENOENT) {
		return t.file(fd, elems, err)
	}
	// Walk element by element, making what is missing.
	dir := root
	for i, e := range elems {
		if err := unix.Mkdirat(dir, e, 0o750); err != nil && !errors.Is(err, unix.EEXIST) {
			closeIfNot(dir, root)
			return nil, &os.PathError{Op: "mkdir", Path: filepath.Join(append([]string{t.Root}, elems[:i+1]...)...), Err: err}
		}
		next, err := openBeneath(dir, e)
		closeIfNot(dir, root)
		if err != nil {
			return t.file(-1, elems[:i+1], err)
		}
		dir = next
	}
	return t.file(dir, elems, nil)
}

func closeIfNot(fd, keep int) {
	if fd != keep {
		_ = unix.Close(fd)
	}
}

func (t *Target) file(fd int, elems []string, err error) (*os.File, error) {
	p := filepath.Join(append([]string{t.Root}, elems...)...)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("%w: an element of %q below %s is a symlink; refusing to follow it", ErrSymlink, p, t.Root)
	case err != nil:
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// openBeneath opens the directory rel below dirfd with O_PATH, following no
// symlink and never leaving dirfd.
func openBeneath(dirfd int, rel string) (int, error) {
	how := &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(dirfd, rel, how)
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// ProcPath is the path through which the kernel reaches the file f is open
// on, for calls that take a path, such as mount(2) and umount(2).
func ProcPath(f *os.File) string {
	return "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
}

// RemoveDir removes the (empty) target directory through its parent, without
// following symlinks. A missing target is not an error.
func (t *Target) RemoveDir() error {
	parent, err := t.OpenParent()
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = parent.Close() }()
	err = unix.Unlinkat(int(parent.Fd()), mountDir, unix.AT_REMOVEDIR)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return &os.PathError{Op: "remove", Path: t.Path, Err: err}
}

// PodUIDOf returns the pod UID element of a path below root/pods, "" when
// path is not below it. The shape is not checked: Parse does that.
func PodUIDOf(root, path string) string {
	rel, err := filepath.Rel(filepath.Join(root, "pods"), path)
	if err != nil || !filepath.IsLocal(rel) {
		return ""
	}
	uid, _, _ := strings.Cut(rel, string(filepath.Separator))
	return uid
}
