package aws

import (
	"context"
	"errors"
	"fmt"

	"github.com/keymount/keymount/provider/aws/identity"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/provider/server"
)

// Regions tells the region of a mount whose class sets none.
// *noderegion.Resolver implements it.
type Regions interface {
	// DefaultRegion returns the region for a mount of pod namespace/name.
	// Its errors carry their gRPC code (see provider/server).
	DefaultRegion(ctx context.Context, namespace, pod string) (string, error)
}

// Identities turns a mount's tokens into AWS credentials.
// *identity.Resolver implements it. Its caller has proven the namespace,
// service account and (for EKS Pod Identity) pod of the spec it passes:
// its caches and shared exchanges are keyed by them.
type Identities interface {
	For(ctx context.Context, s *spec.Spec) (*identity.Identity, error)
	// Forget drops the cached credentials of an identity AWS refused.
	Forget(key string)
}

// Fetcher fetches objects. *store.Store implements it.
type Fetcher interface {
	Fetch(ctx context.Context, req *store.Request) (*store.Result, error)
}

// Provider serves AWS objects behind the provider kit.
type Provider struct {
	regions    Regions
	tokens     Verifier
	identities Identities
	store      Fetcher
}

var _ server.Provider = (*Provider)(nil)

// New returns the AWS provider. regions tells the region of a class
// without a region parameter; tokens proves each mount's identity.
func New(regions Regions, tokens Verifier, ids Identities, st Fetcher) (*Provider, error) {
	if regions == nil || tokens == nil || ids == nil || st == nil {
		return nil, errors.New("aws provider needs a region source, a token verifier, an identity resolver and a store")
	}
	return &Provider{regions: regions, tokens: tokens, identities: ids, store: st}, nil
}

// Mount parses the class's parameters once, proves the pod's identity with
// its token, gets credentials for that identity and fetches every object.
// A caller whose token proves nothing is refused before any cache, API
// read or store call.
func (p *Provider) Mount(ctx context.Context, req *server.MountRequest) (*server.MountResult, error) {
	s, err := spec.Parse(req.Attributes, req.Permission)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", server.ErrInvalidParameters, err)
	}
	id, err := p.identify(ctx, s)
	if err != nil {
		return nil, err
	}
	res, err := p.store.Fetch(ctx, &store.Request{
		Identity: id.Key, Credentials: id.Credentials, FailoverCredentials: id.FailoverCredentials,
		Region: s.Region, FailoverRegion: s.FailoverRegion,
		Objects: s.Objects, Current: req.CurrentVersions,
	})
	if err != nil {
		var fe *store.FetchError
		if errors.As(err, &fe) && fe.CredentialsRejected() {
			p.identities.Forget(id.Key)
		}
		return nil, err
	}
	return &server.MountResult{Files: res.Files, Versions: res.Versions}, nil
}

// identify is what Mount and Push share: it proves the identity the
// attributes name with its token, sets the default region when the class
// sets none, and gets that identity's credentials. A caller whose token
// proves nothing is refused before any cache or AWS call.
func (p *Provider) identify(ctx context.Context, s *spec.Spec) (*identity.Identity, error) {
	if err := p.prove(ctx, s); err != nil {
		return nil, err
	}
	if s.Region == "" {
		region, err := p.regions.DefaultRegion(ctx, s.Namespace, s.PodName)
		if err != nil {
			return nil, err
		}
		if err := s.SetDefaultRegion(region); err != nil {
			return nil, fmt.Errorf("%w: %w", server.ErrInvalidParameters, err)
		}
	}
	return p.identities.For(ctx, s)
}
