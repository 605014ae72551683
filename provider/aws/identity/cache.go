package identity

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"
)

// exchangeTimeout bounds one exchange, which runs on behalf of every caller
// waiting for it and so outlives the first caller's context.
const exchangeTimeout = time.Minute

// cache holds the credentials of each identity until refresh before they
// expire. Concurrent misses for one key share a single fetch.
type cache struct {
	clock   clock.PassiveClock
	refresh time.Duration

	group singleflight.Group

	mu      sync.Mutex
	entries map[string]aws.Credentials
}

func newCache(clk clock.PassiveClock, refresh time.Duration) *cache {
	return &cache{clock: clk, refresh: refresh, entries: map[string]aws.Credentials{}}
}

// get returns the cached credentials of key, or fetches and caches them. A
// fetch already running for key is joined rather than repeated.
func (c *cache) get(ctx context.Context, key string, fetch func(context.Context) (aws.Credentials, error)) (aws.Credentials, error) {
	if creds, ok := c.fresh(key); ok {
		return creds, nil
	}
	return shared(ctx, &c.group, key, func(ctx context.Context) (aws.Credentials, error) {
		// A fetch that finished between the check above and this one.
		if creds, ok := c.fresh(key); ok {
			return creds, nil
		}
		creds, err := fetch(ctx)
		if err != nil {
			return aws.Credentials{}, err
		}
		c.store(key, creds)
		return creds, nil
	})
}

// shared runs fn once for all concurrent callers with the same key. fn runs
// on behalf of every waiting caller, so it gets ctx's values but not its
// cancellation, and at most exchangeTimeout; ctx bounds only this caller's wait.
func shared[T any](ctx context.Context, g *singleflight.Group, key string, fn func(context.Context) (T, error)) (T, error) {
	ch := g.DoChan(key, func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exchangeTimeout)
		defer cancel()
		return fn(fctx)
	})
	var zero T
	select {
	case <-ctx.Done():
		return zero, fmt.Errorf("waiting for %s: %w", key, context.Cause(ctx))
	case res := <-ch:
		if res.Err != nil {
			return zero, res.Err
		}
		v, ok := res.Val.(T)
		if !ok {
			return zero, fmt.Errorf("%s: unexpected shared result %T", key, res.Val)
		}
		return v, nil
	}
}

// fresh returns the credentials of key if they are not due for renewal.
func (c *cache) fresh(key string) (aws.Credentials, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	creds, ok := c.entries[key]
	if !ok || c.clock.Now().Add(c.refresh).Before(creds.Expires) {
		return creds, ok
	}
	return aws.Credentials{}, false
}

// store caches creds under key and drops expired entries of other keys, so
// identities that stopped mounting do not pile up.
func (c *cache) store(key string, creds aws.Credentials) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	maps.DeleteFunc(c.entries, func(_ string, v aws.Credentials) bool { return !now.Before(v.Expires) })
	c.entries[key] = creds
}

// dropIdentity forgets the credentials of key and of key@<region> for every
// region: the next get fetches new ones.
func (c *cache) dropIdentity(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	maps.DeleteFunc(c.entries, func(k string, _ aws.Credentials) bool { return k == key || strings.HasPrefix(k, key+"@") })
}

// lazyProvider fetches its credentials when first asked (and from the
// cache after): the failover region's, needed only when that region is.
type lazyProvider struct {
	region string
	get    func(context.Context) (aws.Credentials, error)
}

var _ aws.CredentialsProvider = lazyProvider{}

// Retrieve returns the credentials, fetching them if they are not cached.
func (p lazyProvider) Retrieve(ctx context.Context) (aws.Credentials, error) {
	return p.get(ctx)
}

// String names the provider; it holds no credentials.
func (p lazyProvider) String() string {
	return "credentials{from the STS of " + p.region + " on first use}"
}

// provider serves one set of credentials. Its String redacts them.
type provider struct {
	creds aws.Credentials
}

var _ aws.CredentialsProvider = provider{}

// Retrieve returns the credentials.
func (p provider) Retrieve(context.Context) (aws.Credentials, error) {
	return p.creds, nil
}

// String describes the credentials without revealing them.
func (p provider) String() string {
	return fmt.Sprintf("credentials{source: %s, expires: %s, secrets: <redacted>}",
		p.creds.Source, p.creds.Expires.UTC().Format(time.RFC3339))
}

// GoString keeps %#v from printing the credentials.
func (p provider) GoString() string { return p.String() }
