package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/keymount/keymount/internal/classparams"
	"github.com/keymount/keymount/provider/server"
)

// maxObjectSize bounds one object: a bigger file is a mistake, and would not
// fit the driver's default 4 MiB message limit anyway.
const maxObjectSize = 4 << 20

// Provider serves files from a root directory on the node.
type Provider struct {
	root string // absolute, symlinks resolved
	// namespaces are the pod namespaces served; nil for all.
	namespaces map[string]struct{}
}

var _ server.Provider = (*Provider)(nil)

// New returns a Provider serving files under root, which must be a directory.
func New(root string, opts ...Option) (*Provider, error) {
	if root == "" {
		return nil, errors.New("root directory is not set")
	}
	resolved, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("root directory: %w", err)
	}
	resolved, err = filepath.Abs(resolved)
	if err != nil {
		return nil, fmt.Errorf("root directory: %w", err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return nil, fmt.Errorf("root directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("root %s is not a directory", root)
	}
	d, err := openRoot(resolved)
	if err != nil {
		return nil, fmt.Errorf("root directory: %w", err)
	}
	if err := d.close(); err != nil {
		return nil, fmt.Errorf("root directory: %w", err)
	}
	p := &Provider{root: resolved}
	for _, o := range opts {
		if err := o(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Root is the directory the provider serves, symlinks resolved.
func (p *Provider) Root() string { return p.root }

// Mount reads every object of the request's objects parameter. One object
// that cannot be read fails the whole mount; a parameter or object field the
// provider does not read fails it before anything is read. A pod outside the allowed
// namespaces (WithAllowedNamespaces) gets nothing.
func (p *Provider) Mount(ctx context.Context, req *server.MountRequest) (*server.MountResult, error) {
	if err := p.checkNamespace(req); err != nil {
		return nil, err
	}
	if err := checkParameters(req.Attributes); err != nil {
		return nil, err
	}
	text, ok := req.Attributes[objectsParameter]
	if !ok {
		return nil, invalidf("parameter %q is not set: list the files to mount in the SecretProviderClass's spec.parameters.%s", objectsParameter, objectsParameter)
	}
	objs, err := parseObjects(text, req.Permission, classparams.Ignored(req.Attributes))
	if err != nil {
		return nil, err
	}

	d, err := openRoot(p.root)
	if err != nil {
		return nil, fmt.Errorf("root directory: %w", err)
	}
	defer func() { _ = d.close() }() // read-only descriptor: nothing to lose

	res := &server.MountResult{
		Files:    make([]server.File, 0, len(objs)),
		Versions: make([]server.ObjectVersion, 0, len(objs)),
	}
	read := make(map[string][]byte, len(objs))
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, done := read[o.name]
		if !done {
			data, err = d.read(o.name, maxObjectSize)
			if err != nil {
				return nil, objectError(o.name, err)
			}
			read[o.name] = data
			res.Versions = append(res.Versions, server.ObjectVersion{ID: o.name, Version: version(data)})
		}
		res.Files = append(res.Files, server.File{Path: o.alias, Mode: o.mode, Contents: data})
	}
	return res, nil
}

// version identifies contents: the first 16 bytes of their SHA-256, in hex.
func version(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}
