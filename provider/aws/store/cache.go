package store

import (
	"time"

	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// value is one fetched value and its version. It holds secret bytes: it
// redacts itself when printed.
type value struct {
	data      []byte
	version   string
	fetchedAt time.Time
}

func (v value) String() string { return "value{version: " + v.version + ", data: <redacted>}" }

// GoString redacts %#v the same way as %v.
func (v value) GoString() string { return v.String() }

// cacheKey never lets one identity see another's values.
type cacheKey struct {
	identity string
	item     item
}

// cache is the node-local value cache: a bounded LRU (safe for concurrent
// use) in which pinned values stay until evicted and the others are fresh
// for a while.
type cache struct {
	lru       *lru.Cache
	freshness time.Duration
	clock     clock.PassiveClock
}

func newCache(size int, freshness time.Duration, clk clock.PassiveClock) *cache {
	return &cache{lru: lru.New(size), freshness: freshness, clock: clk}
}

func (c *cache) get(identity string, it item) (value, bool) {
	got, ok := c.lru.Get(cacheKey{identity: identity, item: it})
	if !ok {
		return value{}, false
	}
	v, ok := got.(value)
	if !ok || (!it.pinned() && c.clock.Since(v.fetchedAt) >= c.freshness) {
		return value{}, false
	}
	return v, true
}

func (c *cache) put(identity string, it item, v value) {
	if v.fetchedAt.IsZero() {
		v.fetchedAt = c.clock.Now()
	}
	c.lru.Add(cacheKey{identity: identity, item: it}, v)
}

// batchDenied reports whether identity was recently denied
// BatchGetSecretValue in region.
func (s *Store) batchDenied(identity, region string) bool {
	got, ok := s.noBatch.Get(cacheKey{identity: identity, item: item{region: region}})
	if !ok {
		return false
	}
	at, ok := got.(time.Time)
	return ok && s.cfg.Clock.Since(at) < noBatchFor
}

// denyBatch remembers that identity may not call BatchGetSecretValue in
// region.
func (s *Store) denyBatch(identity, region string) {
	s.noBatch.Add(cacheKey{identity: identity, item: item{region: region}}, s.cfg.Clock.Now())
}

// describeDenied reports whether identity was recently denied DescribeSecret
// in region (an IAM policy may grant GetSecretValue only).
func (s *Store) describeDenied(identity, region string) bool {
	got, ok := s.noDescribe.Get(cacheKey{identity: identity, item: item{region: region}})
	if !ok {
		return false
	}
	at, ok := got.(time.Time)
	return ok && s.cfg.Clock.Since(at) < noBatchFor
}

// denyDescribe remembers that identity may not call DescribeSecret in
// region.
func (s *Store) denyDescribe(identity, region string) {
	s.noDescribe.Add(cacheKey{identity: identity, item: item{region: region}}, s.cfg.Clock.Now())
}
