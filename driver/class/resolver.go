package class

import (
	"context"
	"errors"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

// ErrNotFound is returned when no class with the requested name exists in
// the pod's namespace.
var ErrNotFound = errors.New("secretproviderclass not found")

// ErrInvalid is returned when a class exists but cannot be used as it is.
var ErrInvalid = errors.New("invalid secretproviderclass")

// Resolver finds the SecretProviderClass a volume names in the pod's
// namespace. Implementations return errors wrapping ErrNotFound or
// ErrInvalid so the driver can answer with the right gRPC code.
type Resolver interface {
	Resolve(ctx context.Context, namespace, name string) (*secretsstorev1.SecretProviderClass, error)
}
