package satoken

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// Extra keys of a TokenReview's user for a pod-bound token.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// reviewKey names a TokenReview answer: the hash of the audience and the
// token (the token itself is never kept).
type reviewKey [sha256.Size]byte

func newReviewKey(audience, token string) reviewKey {
	return sha256.Sum256([]byte(audience + "\x00" + token))
}

// reviewAnswer is a remembered TokenReview answer: the claims it proved,
// or why it refused.
type reviewAnswer struct {
	claims  *claims
	denied  error
	expires time.Time
}

// review proves token with a TokenReview, after checking its claims as
// they stand (a token that cannot be what the request names costs no
// request), and remembers the answer per token hash: until the token
// expires when it proves the token, for a short while when it refuses.
func (v *Verifier) review(ctx context.Context, raw string, tok *token, want Expect) (*Identity, error) {
	c, err := tok.unverifiedClaims()
	if err != nil {
		return nil, err
	}
	// Issuer: the TokenReview checks it.
	if _, err := v.check(c, "", want); err != nil {
		return nil, err
	}
	key := newReviewKey(want.Audience, raw)
	if a, ok := v.rememberedReview(key); ok {
		if a.denied != nil {
			return nil, a.denied
		}
		return v.check(a.claims, "", want)
	}
	st, err := v.api.ReviewToken(ctx, raw, []string{want.Audience})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("proving the token with a TokenReview: %w", context.Cause(ctx))
		}
		return nil, fmt.Errorf("%w: issuer discovery failed (%w) and so did the TokenReview: %w",
			ErrUnavailable, v.lastDiscoveryErr(), err)
	}
	denied := reviewDenied(st, c, want)
	now := v.cfg.Clock.Now()
	a := reviewAnswer{claims: c, denied: denied, expires: c.Expiry.Time()}
	if denied != nil {
		a.expires = now.Add(deniedReviewFor)
	}
	v.reviews.Add(key, a)
	if denied != nil {
		return nil, denied
	}
	return v.check(c, "", want)
}

// reviewDenied compares a TokenReview's answer with the token's claims:
// nil when the API server authenticated the token as the service account
// (and pod) they name, for the audience.
func reviewDenied(st *authenticationv1.TokenReviewStatus, c *claims, want Expect) error {
	reason := st.Error
	switch {
	case !st.Authenticated:
		if reason == "" {
			reason = "not authenticated"
		}
		return fmt.Errorf("%w: the API server's TokenReview refused it: %s", ErrDenied, reason)
	case !slices.Contains(st.Audiences, want.Audience):
		return fmt.Errorf("%w: the TokenReview did not confirm audience %q", ErrDenied, want.Audience)
	case st.User.Username != c.Subject:
		return fmt.Errorf("%w: the TokenReview authenticated %q, not %q", ErrDenied, st.User.Username, c.Subject)
	}
	if k := c.Kubernetes; k != nil && k.Pod != nil {
		extra := st.User.Extra
		if !slices.Equal(extra[extraPodName], authenticationv1.ExtraValue{k.Pod.Name}) ||
			!slices.Equal(extra[extraPodUID], authenticationv1.ExtraValue{k.Pod.UID}) {
			return fmt.Errorf("%w: the TokenReview did not confirm the pod the token names", ErrDenied)
		}
	}
	return nil
}

func (v *Verifier) rememberedReview(key reviewKey) (reviewAnswer, bool) {
	got, ok := v.reviews.Get(key)
	if !ok {
		return reviewAnswer{}, false
	}
	a, ok := got.(reviewAnswer)
	if !ok || !v.cfg.Clock.Now().Before(a.expires) {
		v.reviews.Remove(key)
		return reviewAnswer{}, false
	}
	return a, true
}

func (v *Verifier) lastDiscoveryErr() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.discoveryErr == nil {
		return errors.New("no keys")
	}
	return v.discoveryErr
}
