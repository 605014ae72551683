package identity

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"github.com/keymount/keymount/provider/aws/internal/kubeerr"
)

// RoleARNAnnotation names the IAM role of a service account for IRSA.
const RoleARNAnnotation = "eks.amazonaws.com/role-arn"

// DefaultServiceAccountTTL is how long NewKubeServiceAccounts trusts an
// answer.
const DefaultServiceAccountTTL = 5 * time.Minute

// ServiceAccountReader reads the IAM role a service account is annotated
// with.
type ServiceAccountReader interface {
	// RoleARN returns the eks.amazonaws.com/role-arn annotation of the
	// service account namespace/name.
	RoleARN(ctx context.Context, namespace, name string) (string, error)
}

// ServiceAccountGetter reads a service account from the API server.
// *kubeclient.Client implements it.
type ServiceAccountGetter interface {
	GetServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
}

// kubeServiceAccounts reads service accounts from the API server and
// remembers each role for ttl. Errors are not remembered: a service account
// created or annotated after a failed mount is seen on kubelet's retry.
type kubeServiceAccounts struct {
	client ServiceAccountGetter
	ttl    time.Duration
	clock  clock.PassiveClock

	group singleflight.Group

	mu    sync.Mutex
	roles map[string]cachedRole
}

type cachedRole struct {
	arn     string
	expires time.Time
}

var _ ServiceAccountReader = (*kubeServiceAccounts)(nil)

// NewKubeServiceAccounts returns a ServiceAccountReader that gets service
// accounts through c, at most once per service account per ttl
// (DefaultServiceAccountTTL when ttl <= 0).
func NewKubeServiceAccounts(c ServiceAccountGetter, ttl time.Duration) ServiceAccountReader {
	return newKubeServiceAccounts(c, ttl, clock.RealClock{})
}

func newKubeServiceAccounts(c ServiceAccountGetter, ttl time.Duration, clk clock.PassiveClock) *kubeServiceAccounts {
	if ttl <= 0 {
		ttl = DefaultServiceAccountTTL
	}
	return &kubeServiceAccounts{client: c, ttl: ttl, clock: clk, roles: map[string]cachedRole{}}
}

// RoleARN returns the role annotation of namespace/name.
func (k *kubeServiceAccounts) RoleARN(ctx context.Context, namespace, name string) (string, error) {
	key := namespace + "/" + name
	if arn, ok := k.cached(key); ok {
		return arn, nil
	}
	return shared(ctx, &k.group, "serviceaccount:"+key, func(ctx context.Context) (string, error) {
		if arn, ok := k.cached(key); ok {
			return arn, nil
		}
		arn, err := k.get(ctx, namespace, name)
		if err != nil {
			return "", err
		}
		k.remember(key, arn)
		return arn, nil
	})
}

func (k *kubeServiceAccounts) get(ctx context.Context, namespace, name string) (string, error) {
	sa, err := k.client.GetServiceAccount(ctx, namespace, name)
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("service account %s/%s not found: %w", namespace, name, kubeerr.Classify(err))
	}
	if err != nil {
		// Forbidden: the provider lacks get on serviceaccounts
		// (FailedPrecondition); the API server failing: Unavailable.
		return "", fmt.Errorf("reading service account %s/%s: %w", namespace, name, kubeerr.Classify(err))
	}
	arn := sa.Annotations[RoleARNAnnotation]
	if arn == "" {
		return "", fmt.Errorf("%w: annotate service account %s/%s with %s: <role ARN>, "+
			"or set usePodIdentity: \"true\" in the SecretProviderClass",
			ErrMissingRoleARN, namespace, name, RoleARNAnnotation)
	}
	return arn, nil
}

func (k *kubeServiceAccounts) cached(key string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	r, ok := k.roles[key]
	if !ok || !k.clock.Now().Before(r.expires) {
		return "", false
	}
	return r.arn, true
}

// remember caches arn and drops expired entries.
func (k *kubeServiceAccounts) remember(key, arn string) {
	now := k.clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	maps.DeleteFunc(k.roles, func(_ string, r cachedRole) bool { return !now.Before(r.expires) })
	k.roles[key] = cachedRole{arn: arn, expires: now.Add(k.ttl)}
}
