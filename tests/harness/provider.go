package harness

import (
	"context"
	"errors"
	"time"

	"github.com/keymount/keymount/provider/local"
	"github.com/keymount/keymount/provider/server"
)

// runningProvider is the local provider served by the provider kit on
// <ProviderDir>/local.sock.
type runningProvider struct {
	cancel context.CancelFunc
	done   chan error
}

func startProvider(socketDir, root string) (*runningProvider, error) {
	lp, err := local.New(root)
	if err != nil {
		return nil, err
	}
	srv, err := server.New(server.Config{Name: ProviderName, Version: "test", SocketDir: socketDir}, lp)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &runningProvider{cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- srv.Serve(ctx) }()
	if err := waitForSocket(srv.SocketPath(), p.done); err != nil {
		return nil, errors.Join(err, p.stop())
	}
	return p, nil
}

func (p *runningProvider) stop() error {
	p.cancel()
	select {
	case err := <-p.done:
		return err
	case <-time.After(startTimeout):
		return errors.New("provider did not stop within " + startTimeout.String())
	}
}
