package aws

import (
	"context"
	"fmt"

	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/provider/aws/identity"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/internal/mounttoken"
)

// Verifier proves the identity a mount's token names. *satoken.Verifier
// implements it.
type Verifier = mounttoken.Verifier

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
	return mounttoken.Prove(ctx, p.tokens, s.Tokens[audience], satoken.Expect{
		Audience: audience, Namespace: s.Namespace, ServiceAccount: s.ServiceAccount,
		PodName: s.PodName, PodUID: s.PodUID, RequirePod: s.UsePodIdentity,
	}, "")
}
