package aws

import (
	"context"
	"errors"
	"fmt"

	"github.com/keymount/keymount/provider/aws/push"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/server"
)

// Writer writes pushed items into AWS. *push.Writer implements it.
type Writer interface {
	Push(ctx context.Context, req *push.Request) push.Report
	Remove(ctx context.Context, req *push.Request) push.Report
}

// Pusher serves keymount's push extension: it writes with the identity a
// Mount of the same attributes would read with, never the provider's own.
type Pusher struct {
	p *Provider
	w Writer
}

var _ server.Pusher = (*Pusher)(nil)

// NewPusher returns the push extension of p, writing through w.
func NewPusher(p *Provider, w Writer) (*Pusher, error) {
	if p == nil || w == nil {
		return nil, errors.New("aws pusher needs the provider and a writer")
	}
	return &Pusher{p: p, w: w}, nil
}

// Push writes each item with the PushSecret's identity: see package push.
func (u *Pusher) Push(ctx context.Context, req *server.PushRequest) ([]server.PushResult, error) {
	return u.run(ctx, req, u.w.Push)
}

// Remove deletes what keymount wrote for each item: see package push.
func (u *Pusher) Remove(ctx context.Context, req *server.PushRequest) ([]server.PushResult, error) {
	return u.run(ctx, req, u.w.Remove)
}

// run parses the attributes and proves and resolves the identity exactly
// as Mount does (the class's region and the ServiceAccount's tokens), then
// writes. EKS Pod Identity, whose credentials are a pod's, is refused. Credentials AWS refused are forgotten, as after a Mount.
func (u *Pusher) run(ctx context.Context, req *server.PushRequest, write func(context.Context, *push.Request) push.Report) ([]server.PushResult, error) {
	s, err := spec.ParsePush(req.Attributes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", server.ErrInvalidParameters, err)
	}
	if s.UsePodIdentity {
		return nil, fmt.Errorf("%w: %s: EKS Pod Identity credentials belong to a pod and a push has none; "+
			"give the PushSecret's ServiceAccount an IAM role (IRSA, eks.amazonaws.com/role-arn) and a class without %s",
			server.ErrFailedPrecondition, spec.KeyUsePodIdentity, spec.KeyUsePodIdentity)
	}
	id, err := u.p.identify(ctx, s)
	if err != nil {
		return nil, err
	}
	rep := write(ctx, &push.Request{Credentials: id.Credentials, Region: s.Region, Items: req.Items})
	if rep.CredentialsRejected {
		u.p.identities.Forget(id.Key)
	}
	return rep.Results, nil
}
