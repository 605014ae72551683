package atomicwrite

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
)

const (
	// reservedPrefix starts every name the writer keeps in the volume root.
	reservedPrefix = ".."
	// maxPathLen is PATH_MAX on Linux.
	maxPathLen = 4096
	// maxNameLen is NAME_MAX on Linux.
	maxNameLen = 255
	// quotedPathLen bounds how much of a path an error message repeats.
	quotedPathLen = 256
)

var (
	// ErrInvalidPath is wrapped by every error about a provider file path.
	ErrInvalidPath = errors.New("invalid file path")
	// ErrInvalidMode is wrapped when a File.Mode holds more than permission bits.
	ErrInvalidMode = errors.New("invalid file mode")
)

// ValidatePath rejects a provider file path that is empty, absolute, not clean,
// has a ".." element, contains a NUL byte or a backslash, is longer than
// PATH_MAX or has an element longer than NAME_MAX, or whose first element
// starts with ".." (reserved for the writer, like "..data"). The error wraps
// ErrInvalidPath and names the path and the rule it breaks.
func ValidatePath(p string) error {
	if rule := brokenRule(p); rule != "" {
		return pathError(p, rule)
	}
	return nil
}

func brokenRule(p string) string {
	switch {
	case p == "":
		return "path is empty"
	case len(p) > maxPathLen:
		return fmt.Sprintf("path is longer than %d bytes", maxPathLen)
	case strings.IndexByte(p, 0) >= 0:
		return "path contains a NUL byte"
	case strings.IndexByte(p, '\\') >= 0:
		return "path contains a backslash"
	case path.IsAbs(p):
		return "path is absolute"
	case slices.Contains(strings.Split(p, "/"), ".."):
		return `path has a ".." element`
	case path.Clean(p) != p:
		return "path is not clean"
	case p == ".":
		return "path names the volume itself"
	case strings.HasPrefix(p, reservedPrefix):
		return `first element starts with "..", which is reserved for the writer`
	}
	for elem := range strings.SplitSeq(p, "/") {
		if len(elem) > maxNameLen {
			return fmt.Sprintf("an element is longer than %d bytes", maxNameLen)
		}
	}
	return ""
}

func pathError(p, rule string) error {
	if len(p) > quotedPathLen {
		return fmt.Errorf("%w %q (%d bytes, truncated): %s", ErrInvalidPath, p[:quotedPathLen], len(p), rule)
	}
	return fmt.Errorf("%w %q: %s", ErrInvalidPath, p, rule)
}

// normalize validates files as one set and returns a copy sorted by Path with
// every Mode set. Nothing is written when it fails.
func normalize(files []File) ([]File, error) {
	want := make([]File, 0, len(files))
	for _, f := range files {
		if err := ValidatePath(f.Path); err != nil {
			return nil, err
		}
		if f.Mode&^os.ModePerm != 0 {
			return nil, fmt.Errorf("%w %v for %q: only permission bits are allowed", ErrInvalidMode, f.Mode, f.Path)
		}
		if f.Mode == 0 {
			f.Mode = DefaultMode
		}
		want = append(want, f)
	}
	slices.SortFunc(want, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	if err := checkSet(want); err != nil {
		return nil, err
	}
	return want, nil
}

// checkSet rejects a path listed twice and a path that is also a parent
// directory of another path ("a" and "a/b").
func checkSet(files []File) error {
	paths := make(map[string]bool, len(files))
	for _, f := range files {
		if paths[f.Path] {
			return pathError(f.Path, "path is listed twice")
		}
		paths[f.Path] = true
	}
	for _, f := range files {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			if paths[d] {
				return pathError(f.Path, fmt.Sprintf("parent %q is also a file", d))
			}
		}
	}
	return nil
}

// topLevelNames returns the first path element of every file, sorted, once each.
func topLevelNames(files []File) []string {
	names := make([]string, 0, len(files))
	for _, f := range files {
		name, _, _ := strings.Cut(f.Path, "/")
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
