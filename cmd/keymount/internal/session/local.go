package session

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/keymount/keymount/provider/local"
	"github.com/keymount/keymount/provider/server"
)

const (
	// localName is the provider name classes use for the local provider.
	localName = "local"
	// localSocketDir is the session subdirectory holding the local
	// provider's socket.
	localSocketDir = "p"
)

// startLocalProvider serves the local provider from cfg.LocalRoot on
// <tmp>/p/local.sock and returns the socket directory. The socket exists when
// it returns, so the driver finds it on its first call.
func (s *Session) startLocalProvider(ctx context.Context, cfg Config) (string, error) {
	provider, err := local.New(cfg.LocalRoot)
	if err != nil {
		return "", fmt.Errorf("local provider: %w", err)
	}
	dir := filepath.Join(s.tmp, localSocketDir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("create provider socket dir: %w", err)
	}
	srv, err := server.New(server.Config{Name: localName, Version: cfg.Version, SocketDir: dir}, provider)
	if err != nil {
		return "", err
	}
	l, err := net.Listen("unix", srv.SocketPath())
	if err != nil {
		return "", fmt.Errorf("listen on local provider socket: %w", err)
	}
	s.serve("local provider", func() error { return srv.ServeListener(ctx, l) })
	return dir, nil
}
