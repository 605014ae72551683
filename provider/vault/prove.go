package vault

import (
	"context"
	"fmt"

	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/provider/internal/mounttoken"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/provider/vault/spec"
)

// prove checks that the mount's token of the class's audience proves the
// namespace, service account and pod the request names. Nothing of the
// request is trusted before: no login is looked up and nothing is sent to
// Vault for a caller whose token does not prove it.
func (p *Provider) prove(ctx context.Context, s *spec.Spec) error {
	if s.Namespace == "" || s.ServiceAccount == "" {
		return fmt.Errorf("%w: the volume context lacks the pod's namespace or service account "+
			"(is podInfoOnMount set on the CSIDriver?)", server.ErrInvalidParameters)
	}
	return mounttoken.Prove(ctx, p.tokens, s.Token, satoken.Expect{
		Audience: s.Audience, Namespace: s.Namespace, ServiceAccount: s.ServiceAccount,
		PodName: s.PodName, PodUID: s.PodUID,
	}, " (or set the class's "+spec.KeyAudience+")")
}
