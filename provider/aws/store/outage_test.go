package store_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/provider/aws/store"
)

// regionCalls counts the calls fake received per region.
func regionCalls(fake *fakeAWS) map[string]int {
	out := map[string]int{}
	for k, n := range fake.byTarget() {
		for _, r := range []string{"us-east-1", "us-west-2"} {
			if len(k) > len(r) && k[len(k)-len(r):] == r {
				out[r] += n
			}
		}
	}
	return out
}

// TestFailingPrimaryRegionIsRemembered: once the primary region failed and
// the failover region served, the next mounts (of any identity, for an
// unavailable region) go to the failover region at once, until
// RegionDownFor has passed; then the primary is tried again.
func TestFailingPrimaryRegionIsRemembered(t *testing.T) {
	fake := newFakeAWS(t)
	var primaryFails atomic.Bool
	primaryFails.Store(true)
	fake.fault = func(c fakeCall) (int, any) {
		if c.Region == "us-east-1" && primaryFails.Load() {
			return apiError("503")
		}
		return 0, nil
	}
	clk := clocktesting.NewFakeClock(time.Now())
	s := fastStore(fake.url, clk)
	fetch := func(identity string) {
		t.Helper()
		req := request(identity, objects(2, 2))
		req.FailoverRegion = "us-west-2"
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		res, err := s.Fetch(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", identity, err)
		}
		if got := contents(res)["p1"]; got != "p1@1" {
			t.Fatalf("%s: p1 = %q", identity, got)
		}
	}
	step := func(want map[string]int, what string) {
		t.Helper()
		if got := regionCalls(fake); got["us-east-1"] != want["us-east-1"] || got["us-west-2"] != want["us-west-2"] {
			t.Errorf("%s: calls per region %v, want %v", what, got, want)
		}
		fake.reset()
		clk.Step(store.DefaultFreshness) // the next fetch is not served from the cache
	}

	fetch("role-a")
	// One batch per service, each attempted DefaultMaxAttempts times in
	// the primary region, then once in the failover region.
	step(map[string]int{"us-east-1": 2 * store.DefaultMaxAttempts, "us-west-2": 2}, "primary failing")
	if !s.RegionDown("us-east-1") || s.RegionDown("us-west-2") {
		t.Errorf("RegionDown(us-east-1) = %v, RegionDown(us-west-2) = %v; want true, false", s.RegionDown("us-east-1"), s.RegionDown("us-west-2"))
	}

	fetch("role-a")
	step(map[string]int{"us-west-2": 2}, "the same identity again")
	fetch("role-b")
	step(map[string]int{"us-west-2": 2}, "another identity")

	primaryFails.Store(false)
	clk.Step(store.DefaultRegionDownFor)
	fetch("role-a")
	step(map[string]int{"us-east-1": 2}, "after DefaultRegionDownFor")
	if s.RegionDown("us-east-1") {
		t.Error("us-east-1 still down after it answered")
	}
}

// throttledKeyID signs the calls of the identity us-east-1 throttles.
const throttledKeyID = "AKIATHROTTLED"

// TestThrottledPrimaryIsSkippedForThatIdentity: a primary region that
// throttles one identity sends that identity's next mounts to the failover
// region; other identities still use the primary.
func TestThrottledPrimaryIsSkippedForThatIdentity(t *testing.T) {
	fake := newFakeAWS(t)
	fake.fault = func(c fakeCall) (int, any) {
		if c.Region == "us-east-1" && c.AccessKey == throttledKeyID {
			return apiError("ThrottlingException")
		}
		return 0, nil
	}
	clk := clocktesting.NewFakeClock(time.Now())
	s := fastStore(fake.url, clk)
	fetch := func(identity string) {
		t.Helper()
		req := request(identity, objects(2, 0))
		req.FailoverRegion = "us-west-2"
		if identity == "role-throttled" {
			req.Credentials = credentials.NewStaticCredentialsProvider(throttledKeyID, "secret", "")
		}
		if _, err := s.Fetch(t.Context(), req); err != nil {
			t.Fatalf("%s: %v", identity, err)
		}
	}
	fetch("role-throttled")
	fake.reset()
	clk.Step(store.DefaultFreshness)

	fetch("role-throttled")
	if got := regionCalls(fake); got["us-east-1"] != 0 || got["us-west-2"] != 1 {
		t.Errorf("throttled identity again: calls per region %v, want only 1 in us-west-2", got)
	}
	fake.reset()
	fetch("role-other")
	if got := regionCalls(fake); got["us-east-1"] != 1 || got["us-west-2"] != 0 {
		t.Errorf("another identity: calls per region %v, want only 1 in us-east-1", got)
	}
	if s.RegionDown("us-east-1") {
		t.Error("throttling one identity marked the whole region down")
	}
}
