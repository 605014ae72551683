package atomicwrite

import (
	"fmt"
	"os"
)

// File is one file to write.
type File struct {
	Path     string      // relative path inside the volume, may contain sub-directories ("db/password")
	Mode     os.FileMode // permission bits; 0 means DefaultMode
	Contents []byte
}

// DefaultMode is the mode of a File whose Mode is 0.
const DefaultMode os.FileMode = 0o644

// String describes f without its contents, which are secret.
func (f File) String() string {
	return fmt.Sprintf("%q (%v, %d bytes)", f.Path, f.Mode, len(f.Contents))
}

// GoString keeps %#v from printing the contents.
func (f File) GoString() string {
	return fmt.Sprintf("atomicwrite.File{Path: %q, Mode: %#o, Contents: <%d bytes redacted>}", f.Path, uint32(f.Mode), len(f.Contents))
}
