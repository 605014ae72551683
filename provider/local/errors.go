package local

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/keymount/keymount/provider/server"
)

// Errors of reading one object under the root, whatever the platform.
var (
	errMissing = errors.New("missing")
	errEscapes = errors.New("resolves outside the root")
	errDenied  = errors.New("permission denied")
	errLoop    = errors.New("too many levels of symbolic links")
	errTooBig  = errors.New("too large")
)

// notRegularError: the object is not a regular file.
type notRegularError struct{ typ fs.FileMode }

func (e *notRegularError) Error() string {
	switch e.typ {
	case fs.ModeDir:
		return "a directory"
	case fs.ModeNamedPipe:
		return "a named pipe"
	case fs.ModeSocket:
		return "a socket"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "a device"
	default:
		return "not a regular file"
	}
}

// kindError is an error with its own message that errors.Is classifies as
// kind, one of the server kit's sentinels.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

func invalidf(format string, args ...any) error {
	return &kindError{kind: server.ErrInvalidParameters, msg: fmt.Sprintf(format, args...)}
}

// objectError explains why object name could not be read. It never includes
// file contents.
func objectError(name string, err error) error {
	var notRegular *notRegularError
	switch {
	case errors.Is(err, errMissing):
		return &kindError{server.ErrNotFound, fmt.Sprintf("object %q not found under root", name)}
	case errors.Is(err, errEscapes):
		return &kindError{server.ErrPermissionDenied, fmt.Sprintf(
			"object %q resolves outside root: a symlink on its path is absolute or leaves the root", name)}
	case errors.Is(err, errDenied):
		return &kindError{server.ErrPermissionDenied, fmt.Sprintf("object %q under root: permission denied", name)}
	case errors.Is(err, errLoop):
		return invalidf("object %q: too many levels of symbolic links", name)
	case errors.Is(err, errTooBig):
		return invalidf("object %q is larger than the %d MiB limit of one object", name, maxObjectSize>>20)
	case errors.As(err, &notRegular):
		return invalidf("object %q is %v, not a regular file", name, notRegular)
	default:
		return fmt.Errorf("object %q: %w", name, err)
	}
}
