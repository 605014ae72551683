package vaultlogin

import (
	"errors"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ErrNoToken is a login or renewal Vault answered without a token.
var ErrNoToken = errors.New("vault answered without a token")

// Policy is what a Cache does with a login past 2/3 of its TTL.
type Policy int

const (
	// Relogin logs in again; the token it replaces is forgotten.
	Relogin Policy = iota
	// Renew renews the token (renew-self) and keeps the tokens it replaces
	// until Revoke.
	Renew
)

// Observer is told what a Cache does. Its methods are called with the
// Login held: they may read the Login's Key and Identity and the Session's
// TTL and Renewable, nothing else of either.
type Observer interface {
	// VaultRequest counts one request to Vault (failed false, as it is
	// sent) or its failure (failed true): op is login, renew-self or
	// revoke-self (the labels of *metrics.Vault).
	VaultRequest(op string, failed bool)
	// LoggedIn: l logged in and s is its new token.
	LoggedIn(l *Login, s *Session)
	// RenewFailed: renewing l's token failed with err; the next use of l
	// logs in again.
	RenewFailed(l *Login, err error)
	// RevokeFailed: revoking one of l's tokens failed with err; it ends
	// with its TTL.
	RevokeFailed(l *Login, err error)
}

// Config configures a Cache.
type Config struct {
	Policy Policy
	// Margin: a login that cannot be renewed past its end is replaced this
	// long before it ends, or a third of its TTL before when that is
	// sooner. Zero: when it ends.
	Margin time.Duration
	// Clock is the real clock when nil.
	Clock clock.PassiveClock
	// Observer is told nothing when nil.
	Observer Observer
}

// Cache holds the logins of identities, one per key.
type Cache struct {
	cfg Config

	mu     sync.Mutex
	logins map[string]*Login
}

// New returns an empty Cache.
func New(cfg Config) *Cache {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Cache{cfg: cfg, logins: map[string]*Login{}}
}

// Get returns the Login of key, creating it for who.
func (c *Cache) Get(key string, who Identity) *Login {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.logins[key]
	if !ok {
		l = &Login{key: key, who: who, c: c}
		c.logins[key] = l
	}
	return l
}

// Forget drops the Login of key without revoking it (Vault refused its
// token): the next Get of key logs in afresh.
func (c *Cache) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.logins, key)
}

// Sweep forgets the Logins whose key keep does not keep and returns them
// (gone, to Revoke) and the Logins kept.
func (c *Cache) Sweep(keep func(key string) bool) (gone, kept []*Login) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, l := range c.logins {
		if keep(k) {
			kept = append(kept, l)
			continue
		}
		delete(c.logins, k)
		gone = append(gone, l)
	}
	return gone, kept
}

func (c *Cache) now() time.Time { return c.cfg.Clock.Now() }

// margin is how long before the end of a token of ttl that cannot be
// renewed past it the token is replaced.
func (c *Cache) margin(ttl time.Duration) time.Duration {
	return min(c.cfg.Margin, ttl/3)
}

func (c *Cache) request(op string, failed bool) {
	if c.cfg.Observer != nil {
		c.cfg.Observer.VaultRequest(op, failed)
	}
}
