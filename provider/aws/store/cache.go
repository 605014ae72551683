package store

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
	"k8s.io/utils/lru"

	"github.com/keymount/keymount/provider/aws/spec"
)

// value is one fetched value and its version. It holds secret bytes: it
// redacts itself when printed.
type value struct {
	data    []byte
	version string
	// fetchedAt starts the freshness window: the last read of the value,
	// or the last listing that confirmed it (see revalidate.go).
	fetchedAt time.Time
	// readAt is the last read of the value itself (not a listing).
	readAt time.Time
}

func (v value) String() string { return "value{version: " + v.version + ", data: <redacted>}" }

// GoString redacts %#v the same way as %v.
func (v value) GoString() string { return v.String() }

// cacheKey never lets one identity see another's values.
type cacheKey struct {
	identity string
	item     item
}

// cache is the node-local value cache: an LRU bounded in entries and in
// bytes (safe for concurrent use), in which pinned values stay until evicted
// and the others are fresh for a while.
type cache struct {
	lru       *lru.Cache
	freshness time.Duration
	clock     clock.PassiveClock

	// maxBytes bounds the bytes of the entries; bytes is their sum, kept
	// by the LRU's eviction callback. mu serialises puts, so that a key is
	// never counted twice.
	maxBytes int64
	bytes    atomic.Int64
	mu       sync.Mutex

	// listable indexes, per (identity, region), the cached Secrets Manager
	// items that follow the current value or a staging label: those a
	// ListSecrets can revalidate. An entry leaves with its cache entry.
	// Lock order: never call the LRU while holding listableMu (the LRU
	// calls the eviction callback, which takes listableMu, under its lock).
	listableMu sync.Mutex
	listable   map[scope]map[item]struct{}
}

// scope is one identity in one region.
type scope struct {
	identity, region string
}

// listable reports whether a ListSecrets can tell whether it changed.
func (it item) listable() bool { return it.typ == spec.SecretsManager && !it.pinned() }

// entryOverhead is what an entry costs beyond its strings and value: list
// element, map slot, key and value headers.
const entryOverhead = 256

func newCache(size int, maxBytes int64, freshness time.Duration, clk clock.PassiveClock) *cache {
	c := &cache{freshness: freshness, clock: clk, maxBytes: maxBytes, listable: map[scope]map[item]struct{}{}}
	c.lru = lru.NewWithEvictionFunc(size, func(k lru.Key, v any) {
		key, _ := k.(cacheKey)
		val, _ := v.(value)
		c.bytes.Add(-entrySize(key, val))
		c.unindex(key)
	})
	return c
}

// entrySize is what an entry costs in memory, about.
func entrySize(k cacheKey, v value) int64 {
	return int64(entryOverhead + len(k.identity) + len(k.item.region) + len(k.item.name) + len(k.item.version) +
		len(k.item.label) + len(v.data) + len(v.version))
}

func (c *cache) get(identity string, it item) (value, bool) {
	v, ok := c.peek(identity, it)
	if !ok || (!it.pinned() && c.clock.Since(v.fetchedAt) >= c.freshness) {
		return value{}, false
	}
	return v, true
}

// peek returns the cached value of it, fresh or not.
func (c *cache) peek(identity string, it item) (value, bool) {
	got, ok := c.lru.Get(cacheKey{identity: identity, item: it})
	if !ok {
		return value{}, false
	}
	v, ok := got.(value)
	return v, ok
}

// renew starts a new freshness window at at for the cached value of it,
// if that is still version (a listing confirmed it). It reports whether it
// did.
func (c *cache) renew(identity string, it item, version string, at time.Time) bool {
	key := cacheKey{identity: identity, item: it}
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.lru.Get(key)
	v, _ := got.(value)
	if !ok || v.version != version || !at.After(v.fetchedAt) {
		return false
	}
	v.fetchedAt = at
	c.lru.Add(key, v) // same size: replaced in place, no eviction
	return true
}

// listed returns the listable items cached for identity in region.
func (c *cache) listed(identity, region string) []item {
	c.listableMu.Lock()
	defer c.listableMu.Unlock()
	set := c.listable[scope{identity, region}]
	out := make([]item, 0, len(set))
	for it := range set {
		out = append(out, it)
	}
	return out
}

func (c *cache) index(key cacheKey) {
	if !key.item.listable() {
		return
	}
	sc := scope{key.identity, key.item.region}
	c.listableMu.Lock()
	defer c.listableMu.Unlock()
	set := c.listable[sc]
	if set == nil {
		set = map[item]struct{}{}
		c.listable[sc] = set
	}
	set[key.item] = struct{}{}
}

func (c *cache) unindex(key cacheKey) {
	if !key.item.listable() {
		return
	}
	sc := scope{key.identity, key.item.region}
	c.listableMu.Lock()
	defer c.listableMu.Unlock()
	delete(c.listable[sc], key.item)
	if len(c.listable[sc]) == 0 {
		delete(c.listable, sc)
	}
}

// put caches v, then evicts the least recently used entries until the
// cache fits in maxBytes. A value larger than the whole cache is not kept.
func (c *cache) put(identity string, it item, v value) {
	if v.fetchedAt.IsZero() {
		v.fetchedAt = c.clock.Now()
	}
	if v.readAt.IsZero() {
		v.readAt = v.fetchedAt
	}
	key := cacheKey{identity: identity, item: it}
	size := entrySize(key, v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.maxBytes {
		c.lru.Remove(key) // its old size leaves through the eviction callback
		return
	}
	// Replaced in place (the LRU's Add of a cached key evicts nothing):
	// readers do not take c.mu, and one between a Remove and an Add would
	// find the item missing and call the store for it again.
	if got, ok := c.lru.Get(key); ok {
		old, _ := got.(value)
		c.bytes.Add(-entrySize(key, old))
	}
	c.bytes.Add(size)
	c.lru.Add(key, v)
	c.index(key)
	for c.bytes.Load() > c.maxBytes && c.lru.Len() > 0 {
		c.lru.RemoveOldest()
	}
}

// batchDenied reports whether identity was recently denied
// BatchGetSecretValue in region.
func (s *Store) batchDenied(identity, region string) bool {
	return s.markedWithin(s.noBatch, identity, region, noBatchFor)
}

// denyBatch remembers that identity may not call BatchGetSecretValue in
// region.
func (s *Store) denyBatch(identity, region string) {
	s.mark(s.noBatch, identity, region)
}

// describeDenied reports whether identity was recently denied DescribeSecret
// in region (an IAM policy may grant GetSecretValue only).
func (s *Store) describeDenied(identity, region string) bool {
	return s.markedWithin(s.noDescribe, identity, region, noBatchFor)
}

// denyDescribe remembers that identity may not call DescribeSecret in
// region.
func (s *Store) denyDescribe(identity, region string) {
	s.mark(s.noDescribe, identity, region)
}

// markedWithin reports whether (identity, region) was marked in marks less
// than d ago.
func (s *Store) markedWithin(marks *lru.Cache, identity, region string, d time.Duration) bool {
	got, ok := marks.Get(cacheKey{identity: identity, item: item{region: region}})
	if !ok {
		return false
	}
	at, ok := got.(time.Time)
	return ok && s.cfg.Clock.Since(at) < d
}

// mark remembers in marks that (identity, region) was marked now.
func (s *Store) mark(marks *lru.Cache, identity, region string) {
	marks.Add(cacheKey{identity: identity, item: item{region: region}}, s.cfg.Clock.Now())
}
