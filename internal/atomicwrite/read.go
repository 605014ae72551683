package atomicwrite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// readAttempts bounds how often Read starts over because a Write replaced the
// generation it was reading.
const readAttempts = 5

// Read returns the files currently visible in dir (through ..data), sorted by
// Path; (nil, nil) when dir holds no generation yet. All files come from one
// generation. Read takes no lock and may run beside Write.
func Read(dir string) ([]File, error) {
	_, files, err := readCurrent(dir)
	return files, err
}

// readCurrent returns the name and files of the current generation; an empty
// name and nil files when there is none.
func readCurrent(dir string) (string, []File, error) {
	var err error
	for range readAttempts {
		var gen string
		gen, err = currentGeneration(dir)
		if err != nil || gen == "" {
			return "", nil, err
		}
		var files []File
		files, err = readGeneration(filepath.Join(dir, gen))
		if err == nil {
			return gen, files, nil
		}
		if now, nowErr := currentGeneration(dir); nowErr != nil || now == gen {
			break
		}
	}
	return "", nil, err
}

// currentGeneration returns the generation ..data names, "" when there is no ..data.
func currentGeneration(dir string) (string, error) {
	gen, err := os.Readlink(filepath.Join(dir, dataLink))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case errors.Is(err, syscall.EINVAL):
		return "", fmt.Errorf("%w: %q in %q is not a symlink", ErrConflict, dataLink, dir)
	case err != nil:
		return "", err
	case !isGeneration(gen):
		return "", fmt.Errorf("%w: %q in %q points to %q, not to a generation", ErrConflict, dataLink, dir, gen)
	}
	return gen, nil
}

// isGeneration reports whether name can be a generation directory of the volume root.
func isGeneration(name string) bool {
	return strings.HasPrefix(name, reservedPrefix) && name != reservedPrefix &&
		!strings.Contains(name, "/") && name != dataLink && name != dataTmpLink && name != nameTmpLink
}

// readGeneration returns every regular file under genPath, sorted by Path.
func readGeneration(genPath string) ([]File, error) {
	root, err := os.OpenRoot(genPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	files := []File{}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%w: %q in generation %q is not a regular file", ErrConflict, p, genPath)
		}
		f, err := readFile(root, d, p)
		files = append(files, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// readFile reads one regular file of a generation.
func readFile(root *os.Root, d fs.DirEntry, p string) (File, error) {
	fi, err := d.Info()
	if err != nil {
		return File{}, err
	}
	data, err := root.ReadFile(p)
	return File{Path: p, Mode: fi.Mode().Perm(), Contents: data}, err
}
