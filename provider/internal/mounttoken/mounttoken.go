package mounttoken

import (
	"context"
	"errors"
	"fmt"

	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/provider/server"
)

// Verifier proves the identity a mount's token names. *satoken.Verifier
// implements it.
type Verifier interface {
	Verify(ctx context.Context, token string, want satoken.Expect) (*satoken.Identity, error)
}

// Prove checks that token proves want. A missing token is
// server.ErrInvalidParameters naming the CSIDriver's spec.tokenRequests
// entry to add, followed by noTokenHint (another fix, or ""); a refused
// token is marked server.ErrPermissionDenied, a token that cannot be
// checked now server.ErrUnavailable. Every error names the service account.
func Prove(ctx context.Context, v Verifier, token string, want satoken.Expect, noTokenHint string) error {
	_, err := v.Verify(ctx, token, want)
	sa := want.Namespace + "/" + want.ServiceAccount
	switch {
	case err == nil:
		return nil
	case errors.Is(err, satoken.ErrNoToken):
		return fmt.Errorf("%w: %w of service account %s: add {audience: %s} to the CSIDriver's spec.tokenRequests%s",
			server.ErrInvalidParameters, err, sa, want.Audience, noTokenHint)
	case errors.Is(err, satoken.ErrDenied):
		return fmt.Errorf("proving service account %s: %w", sa, server.Mark(err, server.ErrPermissionDenied))
	case errors.Is(err, satoken.ErrUnavailable):
		return fmt.Errorf("proving service account %s: %w", sa, server.Mark(err, server.ErrUnavailable))
	}
	return fmt.Errorf("proving service account %s: %w", sa, err)
}
