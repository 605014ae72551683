package aws

import (
	"context"
	"errors"
	"fmt"

	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/provider/aws/identity"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/server"
)

// Verifier proves the identity a mount's token names. *satoken.Verifier
// implements it.
type Verifier interface {
	Verify(ctx context.Context, token string, want satoken.Expect) (*satoken.Identity, error)
}

// prove checks that the token of the mount's audience (sts.amazonaws.com
// for IRSA, pods.eks.amazonaws.com for EKS Pod Identity) proves the
// namespace, service account and pod the request names. Nothing of the
// request is trusted before: no cache is looked at and no store is asked
// for a caller whose token does not prove it. An EKS Pod Identity mount
// needs a token bound to its pod: its credentials are the pod's.
func (p *Provider) prove(ctx context.Context, s *spec.Spec) error {
	if s.Namespace == "" || s.ServiceAccount == "" {
		return fmt.Errorf("%w: the volume context lacks the pod's namespace or service account "+
			"(is podInfoOnMount set on the CSIDriver?)", identity.ErrInvalidSpec)
	}
	audience := identity.AudienceSTS
	if s.UsePodIdentity {
		audience = identity.AudiencePodIdentity
	}
	_, err := p.tokens.Verify(ctx, s.Tokens[audience], satoken.Expect{
		Audience: audience, Namespace: s.Namespace, ServiceAccount: s.ServiceAccount,
		PodName: s.PodName, PodUID: s.PodUID, RequirePod: s.UsePodIdentity,
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, satoken.ErrNoToken):
		return fmt.Errorf("%w: %w of service account %s/%s: add {audience: %s} to the CSIDriver's spec.tokenRequests",
			server.ErrInvalidParameters, err, s.Namespace, s.ServiceAccount, audience)
	case errors.Is(err, satoken.ErrDenied):
		return fmt.Errorf("proving service account %s/%s: %w", s.Namespace, s.ServiceAccount, server.Mark(err, server.ErrPermissionDenied))
	case errors.Is(err, satoken.ErrUnavailable):
		return fmt.Errorf("proving service account %s/%s: %w", s.Namespace, s.ServiceAccount, server.Mark(err, server.ErrUnavailable))
	}
	return fmt.Errorf("proving service account %s/%s: %w", s.Namespace, s.ServiceAccount, err)
}
