package store

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/provider/aws/spec"
)

// TestCacheBoundedInBytes: the cache never holds more than its byte
// budget, evicts the least recently used values first, keeps its count
// right when a key is replaced, and does not keep a value larger than the
// whole budget.
func TestCacheBoundedInBytes(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	const kib = 1 << 10
	c := newCache(1000, 4*(kib+entryOverhead+64), time.Minute, clk)
	itemN := func(i int) item {
		return item{typ: spec.SecretsManager, region: "us-east-1", name: fmt.Sprintf("s%d", i), version: "v1"}
	}
	val := func(n int) value { return value{data: []byte(strings.Repeat("x", n)), version: "v1"} }

	for i := range 10 {
		c.put("role", itemN(i), val(kib))
		if b := c.bytes.Load(); b > c.maxBytes {
			t.Fatalf("after %d puts: %d bytes cached, over the budget of %d", i+1, b, c.maxBytes)
		}
	}
	for i := range 10 {
		_, ok := c.get("role", itemN(i))
		if want := i >= 6; ok != want {
			t.Errorf("s%d cached: %v, want %v (the 4 most recent fit)", i, ok, want)
		}
	}

	// Replacing a key counts it once.
	before := c.bytes.Load()
	for range 5 {
		c.put("role", itemN(9), val(kib))
	}
	if c.bytes.Load() != before {
		t.Errorf("replacing a value changed the count: %d -> %d", before, c.bytes.Load())
	}

	// A value larger than the budget is served but not kept, and does not
	// flush the cache.
	c.put("role", itemN(100), val(5*kib))
	if _, ok := c.get("role", itemN(100)); ok {
		t.Error("a value larger than the cache was kept")
	}
	if _, ok := c.get("role", itemN(9)); !ok {
		t.Error("a value too large to keep evicted the others")
	}

	// Every entry gone: nothing counted.
	c.lru.Clear()
	if b := c.bytes.Load(); b != 0 {
		t.Errorf("%d bytes counted in an empty cache", b)
	}
}

// TestListableIndexFollowsEvictions: the index of listable items holds
// exactly the cached Secrets Manager items that follow a current value or a
// label, per identity and region, and loses them with their entries.
func TestListableIndexFollowsEvictions(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := newCache(5, 1<<20, time.Minute, clk)
	sm := func(i int) item {
		return item{typ: spec.SecretsManager, region: "us-east-1", name: fmt.Sprintf("s%d", i)}
	}
	v := value{data: []byte("x"), version: "v1"}
	c.put("role-a", item{typ: spec.SSMParameter, region: "us-east-1", name: "p"}, v)
	pinned := sm(0)
	pinned.version = "v1"
	c.put("role-a", pinned, v)
	labelled := sm(1)
	labelled.label = "blue"
	c.put("role-a", labelled, v)
	c.put("role-b", sm(2), v)
	c.put("role-a", sm(3), v)
	got := c.listed("role-a", "us-east-1")
	if len(got) != 2 || !slices.Contains(got, labelled) || !slices.Contains(got, sm(3)) {
		t.Errorf("listed(role-a) = %v, want the label item and s3 only", got)
	}
	if got := c.listed("role-a", "eu-west-1"); len(got) != 0 {
		t.Errorf("listed(role-a, eu-west-1) = %v, want none", got)
	}
	for i := 10; i < 15; i++ { // evicts everything above
		c.put("role-c", sm(i), v)
	}
	if got := c.listed("role-a", "us-east-1"); len(got) != 0 {
		t.Errorf("listed(role-a) after evictions = %v, want none", got)
	}
	if got := c.listed("role-c", "us-east-1"); len(got) != 5 {
		t.Errorf("listed(role-c) = %v, want its 5 items", got)
	}
	c.listableMu.Lock()
	defer c.listableMu.Unlock()
	if len(c.listable) != 1 {
		t.Errorf("the index holds %d scopes, want 1 (role-c's)", len(c.listable))
	}
}

// TestCachePutNeverHidesTheItem: a put of a cached item replaces its value
// in place. Readers take no lock of the cache's own; a put that removed
// the old entry before adding the new one left a moment where a reader
// found the item missing and called the store for it again (a refresh of
// 100 pods made two BatchGetSecretValue calls for one changed secret).
// The byte count stays right and the item stays in the listable index.
func TestCachePutNeverHidesTheItem(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := newCache(100, 1<<20, time.Minute, clk)
	it := item{typ: spec.SecretsManager, region: "us-east-1", name: "db"}
	val := func(i int) value { return value{data: []byte(strings.Repeat("x", 10+i%7)), version: fmt.Sprint(i)} }
	c.put("role", it, val(0))

	const puts = 20000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= puts; i++ {
			c.put("role", it, val(i))
		}
	}()
	misses := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		if _, ok := c.peek("role", it); !ok {
			misses++
		}
	}
	if misses > 0 {
		t.Errorf("a reader found the item missing %d times while it was being replaced", misses)
	}
	if got, want := c.bytes.Load(), entrySize(cacheKey{identity: "role", item: it}, val(puts)); got != want {
		t.Errorf("%d bytes counted after the replacements, want %d (one entry)", got, want)
	}
	if listed := c.listed("role", "us-east-1"); !slices.Equal(listed, []item{it}) {
		t.Errorf("listable index %v, want only %v", listed, it)
	}
}
