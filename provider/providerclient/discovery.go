package providerclient

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// providerNamePattern is the provider name the socket file name is built
// from, as upstream defines it.
var providerNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{0,30}$`)

// validateName rejects a provider name that cannot name a socket.
func validateName(provider string) error {
	if provider == "" {
		return fmt.Errorf("%w %q: the SecretProviderClass must set spec.provider", ErrInvalidProviderName, provider)
	}
	if !providerNamePattern.MatchString(provider) {
		return fmt.Errorf("%w %q: must match %s", ErrInvalidProviderName, provider, providerNamePattern)
	}
	return nil
}

// SocketPath returns the socket of provider: <dir>/<provider>.sock in the
// first configured directory where that file exists and is a socket. A file
// there that is not a socket is skipped. It only discovers; it does not
// connect.
func (c *Client) SocketPath(provider string) (string, error) {
	if err := validateName(provider); err != nil {
		return "", err
	}
	name := provider + ".sock"
	var skipped []string
	for _, dir := range c.dirs {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			skipped = append(skipped, err.Error())
		case fi.Mode()&os.ModeSocket == 0:
			skipped = append(skipped, path+" is not a socket")
		default:
			c.found.Store(provider, struct{}{})
			return path, nil
		}
	}
	msg := fmt.Sprintf("provider %q not found: no socket %s in %s", provider, name, strings.Join(c.dirs, ", "))
	if len(skipped) > 0 {
		msg += " (skipped: " + strings.Join(skipped, "; ") + ")"
	}
	return "", &notFoundError{msg: msg}
}

// Found reports whether SocketPath has found provider's socket since the
// Client was created (it may be gone since). Names it is true for are
// bounded by the socket files of the provider directories, which only the
// node's operator places: the metrics label a provider by name only when
// Found, so a SecretProviderClass naming a made-up provider adds no series.
func (c *Client) Found(provider string) bool {
	_, ok := c.found.Load(provider)
	return ok
}

// notFoundError words the not-found message around the provider and still
// matches ErrProviderNotFound.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

func (e *notFoundError) Unwrap() error { return ErrProviderNotFound }
