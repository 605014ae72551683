package server

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/keymount/keymount/internal/atomicwrite"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// MountResult is what a Provider returns for a successful mount.
type MountResult struct {
	// Files to write into the volume.
	Files []File
	// Versions of every object the provider mounted.
	Versions []ObjectVersion
}

// File is one file of the volume. It holds secret bytes: it redacts itself
// when printed.
type File struct {
	// Path relative to the volume root: clean, no ".." element, not starting
	// with "..".
	Path string
	// Mode holds permission bits only.
	Mode os.FileMode
	// Contents of the file.
	Contents []byte
}

// DirFiles writes each key as a file under dir, in key order: the files of
// a keymount extract or find (a SecretSync's keymount.io/data-from lists
// dir).
func DirFiles(dir string, mode os.FileMode, keys map[string][]byte) []File {
	files := make([]File, 0, len(keys))
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		files = append(files, File{Path: dir + "/" + k, Mode: mode, Contents: keys[k]})
	}
	return files
}

// String prints the file without its contents.
func (f File) String() string {
	return fmt.Sprintf("File{Path: %q, Mode: %#o, Contents: <%d bytes redacted>}", f.Path, uint32(f.Mode), len(f.Contents))
}

// GoString redacts %#v the same way as %v.
func (f File) GoString() string { return f.String() }

// ObjectVersion is the version of one mounted object, recorded by the driver
// in the pod status.
type ObjectVersion struct {
	ID      string
	Version string
}

// toWire converts a result, checking what the driver would reject anyway so
// that a provider bug surfaces here with a clear message.
func toWire(res *MountResult) (*v1alpha1.MountResponse, error) {
	if res == nil {
		return nil, fmt.Errorf("provider returned no result and no error")
	}
	resp := &v1alpha1.MountResponse{
		ObjectVersion: make([]*v1alpha1.ObjectVersion, 0, len(res.Versions)),
		Files:         make([]*v1alpha1.File, 0, len(res.Files)),
	}
	for _, v := range res.Versions {
		resp.ObjectVersion = append(resp.ObjectVersion, &v1alpha1.ObjectVersion{Id: v.ID, Version: v.Version})
	}
	seen := make(map[string]bool, len(res.Files))
	for _, f := range res.Files {
		if err := ValidatePath(f.Path); err != nil {
			return nil, fmt.Errorf("provider returned an invalid file: %w", err)
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("provider returned file %q twice", f.Path)
		}
		seen[f.Path] = true
		if f.Mode&^os.ModePerm != 0 {
			return nil, fmt.Errorf("provider returned file %q with mode %v: only permission bits are allowed", f.Path, f.Mode)
		}
		mode := int32(f.Mode) //nolint:gosec // G115: only permission bits (checked above), at most 0777.
		resp.Files = append(resp.Files, &v1alpha1.File{Path: f.Path, Mode: mode, Contents: f.Contents})
	}
	return resp, nil
}

// ValidatePath reports whether p may name a file in a volume. The rule is
// the driver's own (package atomicwrite): relative, clean, no ".." element,
// not starting with ".." (the driver keeps "..data" there), no NUL byte or
// backslash, within PATH_MAX and NAME_MAX. A provider that checks with it
// never returns a file the driver would refuse.
func ValidatePath(p string) error {
	return atomicwrite.ValidatePath(p)
}
