package vault

import (
	"context"
	"errors"
	"fmt"

	"github.com/keymount/keymount/internal/satoken"
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
	_, err := p.tokens.Verify(ctx, s.Token, satoken.Expect{
		Audience: s.Audience, Namespace: s.Namespace, ServiceAccount: s.ServiceAccount,
		PodName: s.PodName, PodUID: s.PodUID,
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, satoken.ErrNoToken):
		return fmt.Errorf("%w: %w of service account %s/%s: add {audience: %s} to the CSIDriver's spec.tokenRequests (or set the class's %s)",
			server.ErrInvalidParameters, err, s.Namespace, s.ServiceAccount, s.Audience, spec.KeyAudience)
	case errors.Is(err, satoken.ErrDenied):
		return fmt.Errorf("proving service account %s/%s: %w", s.Namespace, s.ServiceAccount, server.Mark(err, server.ErrPermissionDenied))
	case errors.Is(err, satoken.ErrUnavailable):
		return fmt.Errorf("proving service account %s/%s: %w", s.Namespace, s.ServiceAccount, server.Mark(err, server.ErrUnavailable))
	}
	return fmt.Errorf("proving service account %s/%s: %w", s.Namespace, s.ServiceAccount, err)
}
