package tokens

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// AttrTokens is the MountRequest attribute whose value Tokens returns.
const AttrTokens = "csi.storage.k8s.io/serviceAccount.tokens" //nolint:gosec // G101: an attribute key, not a credential.

// Defaults of Config.
const (
	// DefaultExpirationSeconds is secrets-store-sync-controller's token
	// lifetime; its admission policy refuses any other.
	DefaultExpirationSeconds int64 = 600
	// DefaultRenewFraction renews a token when less than a fifth of its
	// lifetime remains (kubelet renews at 80 %).
	DefaultRenewFraction = 0.2
	// DefaultRequestTimeout bounds one TokenRequest.
	DefaultRequestTimeout = 30 * time.Second
)

// pruneInterval is how often Tokens drops expired entries by itself.
const pruneInterval = time.Minute

// Config tunes a Manager. The zero value is the sync controller's behaviour.
type Config struct {
	// ExpirationSeconds is the requested token lifetime; 0 means
	// DefaultExpirationSeconds. The API server requires at least 600.
	ExpirationSeconds int64
	// RenewFraction: a token is renewed once less than this fraction of its
	// lifetime remains; 0 means DefaultRenewFraction. Must be below 1.
	RenewFraction float64
	// RequestTimeout bounds one TokenRequest, whoever waits for it; 0 means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// BoundObjectRef, if set, binds every token to that object (e.g. the
	// controller's Node), so the tokens die with it.
	BoundObjectRef *authenticationv1.BoundObjectReference
	// Clock tells the time; nil means the real clock.
	Clock clock.PassiveClock
}

// key names one cached token. Names and namespaces cannot hold "/", so
// String is unambiguous even though an audience can.
type key struct {
	namespace, serviceAccount, audience string
}

func (k key) String() string { return k.namespace + "/" + k.serviceAccount + "/" + k.audience }

// slot holds the token of one key. A flight stores its result only into
// the slot it started with, so a token asked for before Invalidate or a
// Forget is never cached after it.
type slot struct {
	token    *authenticationv1.TokenRequestStatus // nil until the first answer
	obtained time.Time                            // when the answer arrived
}

// Manager mints and caches service-account tokens. It is safe for
// concurrent use.
type Manager struct {
	client corev1client.CoreV1Interface
	cfg    Config
	clock  clock.PassiveClock
	group  singleflight.Group

	mu        sync.Mutex
	slots     map[key]*slot
	lastPrune time.Time
}

// NewManager returns a Manager that requests tokens through client.
func NewManager(client corev1client.CoreV1Interface, cfg Config) (*Manager, error) {
	if client == nil {
		return nil, errors.New("tokens: the Kubernetes client is nil")
	}
	if cfg.ExpirationSeconds == 0 {
		cfg.ExpirationSeconds = DefaultExpirationSeconds
	}
	if cfg.ExpirationSeconds < 600 {
		return nil, fmt.Errorf("tokens: expirationSeconds %d is below 600, the least the API server accepts: use 600 or more", cfg.ExpirationSeconds)
	}
	if cfg.RenewFraction == 0 {
		cfg.RenewFraction = DefaultRenewFraction
	}
	if cfg.RenewFraction <= 0 || cfg.RenewFraction >= 1 {
		return nil, fmt.Errorf("tokens: renew fraction %v is not between 0 and 1 (exclusive): use e.g. 0.2", cfg.RenewFraction)
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	c := cfg.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	return &Manager{client: client, cfg: cfg, clock: c, slots: map[key]*slot{}, lastPrune: c.Now()}, nil
}

// Tokens returns the value of the csi.storage.k8s.io/serviceAccount.tokens
// attribute for serviceAccount in namespace: a JSON object of each audience
// to its TokenRequest status, as kubelet builds it. No audiences give ""
// (kubelet then sends no such attribute). Errors keep the API server's
// (apierrors.IsNotFound, IsForbidden work) and never hold a token.
func (m *Manager) Tokens(ctx context.Context, namespace, serviceAccount string, audiences []string) (string, error) {
	if len(audiences) == 0 {
		return "", nil
	}
	if namespace == "" || serviceAccount == "" {
		return "", fmt.Errorf("tokens: namespace %q or service account %q is empty: name the service account whose tokens the provider gets", namespace, serviceAccount)
	}
	m.maybePrune()
	out := make(map[string]authenticationv1.TokenRequestStatus, len(audiences))
	for _, aud := range audiences {
		if _, done := out[aud]; done {
			continue
		}
		st, err := m.token(ctx, key{namespace, serviceAccount, aud})
		if err != nil {
			return "", err
		}
		out[aud] = st
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("tokens: encode %s: %w", AttrTokens, err)
	}
	return string(b), nil
}

// token returns the cached token of k, or one fresh from the API server
// when it is due for renewal.
func (m *Manager) token(ctx context.Context, k key) (authenticationv1.TokenRequestStatus, error) {
	now := m.clock.Now()
	m.mu.Lock()
	s := m.slots[k]
	if s == nil {
		s = &slot{}
		m.slots[k] = s
	}
	cached, obtained := s.token, s.obtained
	m.mu.Unlock()
	if cached != nil && !m.renewDue(cached, obtained, now) {
		return *cached, nil
	}

	ch := m.group.DoChan(k.String(), func() (any, error) { return m.request(ctx, k, s) })
	var res singleflight.Result
	select {
	case res = <-ch:
	case <-ctx.Done():
		return authenticationv1.TokenRequestStatus{}, fmt.Errorf("tokens: wait for the token of service account %s/%s (audience %q): %w",
			k.namespace, k.serviceAccount, k.audience, context.Cause(ctx))
	}
	if res.Err == nil {
		if st, ok := res.Val.(*authenticationv1.TokenRequestStatus); ok {
			return *st, nil
		}
		return authenticationv1.TokenRequestStatus{}, errors.New("tokens: internal error: a request returned no token status")
	}
	// A renewal failed: a token still valid serves until it expires, unless
	// its service account is gone (its tokens died with it).
	if cached != nil && now.Before(cached.ExpirationTimestamp.Time) && !apierrors.IsNotFound(res.Err) {
		klog.ErrorS(res.Err, "cannot renew a service account token, using the current one until it expires",
			"namespace", k.namespace, "serviceAccount", k.serviceAccount, "audience", k.audience,
			"expiration", cached.ExpirationTimestamp.Time)
		return *cached, nil
	}
	return authenticationv1.TokenRequestStatus{}, res.Err
}

// renewDue tells whether a token obtained at obtained needs renewal at now.
func (m *Manager) renewDue(t *authenticationv1.TokenRequestStatus, obtained, now time.Time) bool {
	exp := t.ExpirationTimestamp.Time
	life := exp.Sub(obtained)
	margin := time.Duration(float64(life) * m.cfg.RenewFraction)
	return !now.Before(exp.Add(-margin))
}

// request makes one TokenRequest for k and stores the answer in s, if s is
// still k's slot. It runs once per flight, detached from the cancellation of
// the caller that started it (others wait for it too).
func (m *Manager) request(ctx context.Context, k key, s *slot) (*authenticationv1.TokenRequestStatus, error) {
	// A flight that ended between the caller's look at the slot and its
	// joining this one may have stored a fresh token: serve it, or every
	// caller that lost that race would request one more.
	m.mu.Lock()
	stored, storedAt := s.token, s.obtained
	m.mu.Unlock()
	if stored != nil && !m.renewDue(stored, storedAt, m.clock.Now()) {
		return stored, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.RequestTimeout)
	defer cancel()
	exp := m.cfg.ExpirationSeconds
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    m.cfg.BoundObjectRef,
	}}
	if k.audience != "" {
		tr.Spec.Audiences = []string{k.audience}
	}
	got, err := m.client.ServiceAccounts(k.namespace).CreateToken(ctx, k.serviceAccount, tr, metav1.CreateOptions{})
	if err == nil && (got == nil || got.Status.Token == "" || got.Status.ExpirationTimestamp.IsZero()) {
		err = errors.New("the API server answered without a token or expiration")
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			m.forgetServiceAccount(k.namespace, k.serviceAccount)
		} else {
			m.drop(k, s)
		}
		return nil, fmt.Errorf("tokens: request a token for service account %s/%s (audience %q): %w",
			k.namespace, k.serviceAccount, k.audience, err)
	}
	st := got.Status
	obtained := m.clock.Now()
	m.mu.Lock()
	if m.slots[k] == s {
		s.token, s.obtained = &st, obtained
	}
	m.mu.Unlock()
	klog.V(4).InfoS("obtained a service account token", "namespace", k.namespace, "serviceAccount", k.serviceAccount,
		"audience", k.audience, "expiration", st.ExpirationTimestamp.Time)
	return &st, nil
}

// drop removes s after a failed first request, if it is still k's slot
// and has no token.
func (m *Manager) drop(k key, s *slot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.slots[k] == s && s.token == nil {
		delete(m.slots, k)
	}
}
