package satoken

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// Sentinel errors, wrapped with %w.
var (
	// ErrNoToken: the request carries no token for the audience.
	ErrNoToken = errors.New("no service account token")
	// ErrDenied: the token does not prove the identity the request names.
	ErrDenied = errors.New("service account token refused")
	// ErrUnavailable: the issuer keys could not be read and a TokenReview
	// could not be made; a retry may succeed.
	ErrUnavailable = errors.New("service account token cannot be verified now")
)

// Paths of the API server's service account issuer discovery.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/openid/v1/jwks"
)

// Defaults of Config.
const (
	DefaultMinRefetchInterval = 10 * time.Second
	DefaultKeysMaxAge         = time.Hour
	DefaultDiscoveryRetry     = time.Minute
	DefaultLeeway             = time.Minute
	DefaultReviewCacheSize    = 4096
	// deniedReviewFor is how long a TokenReview's refusal is remembered.
	deniedReviewFor = 10 * time.Second
	// maxTokenBytes bounds the token parsed: Kubernetes tokens are about
	// 1 KiB.
	maxTokenBytes = 16 << 10
)

// APIServer is what a Verifier reads from the API server.
// *kubeclient.Client implements it.
type APIServer interface {
	// GetRaw GETs path (DiscoveryPath, JWKSPath) and returns the body.
	GetRaw(ctx context.Context, path string) ([]byte, error)
	// ReviewToken creates a TokenReview of token for audiences.
	ReviewToken(ctx context.Context, token string, audiences []string) (*authenticationv1.TokenReviewStatus, error)
}

// Config configures a Verifier. Zero fields take the defaults.
type Config struct {
	// MinRefetchInterval is the least time between two reads of the keys
	// (DefaultMinRefetchInterval): a token naming an unknown key ID
	// triggers a read only after it.
	MinRefetchInterval time.Duration
	// KeysMaxAge is how long the keys are used before they are read again
	// (DefaultKeysMaxAge), so that a key the API server dropped stops
	// being trusted.
	KeysMaxAge time.Duration
	// DiscoveryRetry is how long after discovery failed TokenReviews are
	// used before discovery is tried again (DefaultDiscoveryRetry).
	DiscoveryRetry time.Duration
	// Leeway is the clock skew allowed on exp, nbf and iat
	// (DefaultLeeway).
	Leeway time.Duration
	// ReviewCacheSize bounds the TokenReview answers remembered
	// (DefaultReviewCacheSize).
	ReviewCacheSize int
	// Clock is the time tokens are checked against (default real time).
	Clock clock.PassiveClock
}

func (c Config) withDefaults() Config {
	if c.MinRefetchInterval <= 0 {
		c.MinRefetchInterval = DefaultMinRefetchInterval
	}
	if c.KeysMaxAge <= 0 {
		c.KeysMaxAge = DefaultKeysMaxAge
	}
	if c.DiscoveryRetry <= 0 {
		c.DiscoveryRetry = DefaultDiscoveryRetry
	}
	if c.Leeway <= 0 {
		c.Leeway = DefaultLeeway
	}
	if c.ReviewCacheSize <= 0 {
		c.ReviewCacheSize = DefaultReviewCacheSize
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

// Expect is what a request says about its caller, which the token must
// prove.
type Expect struct {
	// Audience is the audience the token must carry (the audience the
	// request handed it for).
	Audience string
	// Namespace and ServiceAccount name the pod's service account.
	Namespace, ServiceAccount string
	// PodName and PodUID name the pod. A token bound to a pod must be
	// bound to this one.
	PodName, PodUID string
	// RequirePod refuses a token that is not bound to a pod (for
	// credentials that belong to one pod).
	RequirePod bool
}

// Identity is what a token proved.
type Identity struct {
	Namespace, ServiceAccount string
	// PodName and PodUID are the pod the token is bound to; empty for a
	// token bound to no pod.
	PodName, PodUID string
	// Expiry is when the token expires.
	Expiry time.Time
}

func subject(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// Verifier proves service account tokens. It is safe for concurrent use;
// create one per process.
type Verifier struct {
	cfg Config
	api APIServer

	// fetchMu serializes reads of discovery and keys.
	fetchMu sync.Mutex
	mu      sync.Mutex
	keys    *keySet // nil until read
	// lastFetch is when the keys were last read, or tried.
	lastFetch time.Time
	// discoveryErr is why the last read failed; nil after a success.
	discoveryErr error

	reviews *lru.Cache
}

// New returns a Verifier reading the keys from api.
func New(cfg Config, api APIServer) (*Verifier, error) {
	if api == nil {
		return nil, errors.New("token verifier needs an API server client")
	}
	cfg = cfg.withDefaults()
	return &Verifier{cfg: cfg, api: api, reviews: lru.New(cfg.ReviewCacheSize)}, nil
}

// Verify proves that token is a service account token for want.Audience
// of the service account (and pod) want names, and returns what it proved.
func (v *Verifier) Verify(ctx context.Context, token string, want Expect) (*Identity, error) {
	if token == "" {
		return nil, fmt.Errorf("%w for audience %q", ErrNoToken, want.Audience)
	}
	if want.Audience == "" || want.Namespace == "" || want.ServiceAccount == "" {
		return nil, fmt.Errorf("%w: the request names no audience, namespace or service account", ErrDenied)
	}
	if len(token) > maxTokenBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than any service account token", ErrDenied, len(token))
	}
	tok, err := parse(token)
	if err != nil {
		return nil, err
	}
	keys, err := v.keysFor(ctx, tok.keyID)
	if errors.Is(err, errNoDiscovery) {
		return v.review(ctx, token, tok, want)
	}
	if err != nil {
		return nil, err
	}
	c, err := tok.verify(keys)
	if err != nil {
		return nil, err
	}
	return v.check(c, keys.issuer, want)
}
