package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
)

const listSecrets = "secretsmanager.ListSecrets@us-east-1"

// fetchEach fetches every object of objs in its own Fetch call (one class of
// one object per SecretSync, as keymount-controller's benchmark), one after
// the other, and returns the contents by file name.
func fetchEach(t *testing.T, s *store.Store, identity string, objs []spec.Object) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range objs {
		res, err := s.Fetch(t.Context(), request(identity, []spec.Object{o}))
		if err != nil {
			t.Fatalf("%s: %v", o.Name, err)
		}
		for k, v := range contents(res) {
			out[k] = v
		}
	}
	return out
}

// batchSizes returns the number of names of every BatchGetSecretValue the
// fake received.
func (f *fakeAWS) batchSizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for _, c := range f.calls {
		if c.Target == "secretsmanager.BatchGetSecretValue" {
			out = append(out, len(c.Names))
		}
	}
	return out
}

// listCalls returns the ListSecrets calls the fake received.
func (f *fakeAWS) listCalls() []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeCall
	for _, c := range f.calls {
		if c.Target == "secretsmanager.ListSecrets" {
			out = append(out, c)
		}
	}
	return out
}

// TestListRevalidatesSeparateFetches: 100 objects of one identity, each
// asked for by its own Fetch call after the freshness window, cost one
// ListSecrets and no value read, whether the calls come one after the
// other or all at once; the observer hears the ListSecrets.
func TestListRevalidatesSeparateFetches(t *testing.T) {
	for _, concurrent := range []bool{false, true} {
		t.Run(fmt.Sprintf("concurrent=%v", concurrent), func(t *testing.T) {
			fake := newFakeAWS(t)
			rec := &recorder{calls: map[string]int{}}
			clk := clocktesting.NewFakeClock(time.Now())
			s := store.New(store.Config{Endpoint: fake.url, MaxBackoff: 20 * time.Millisecond, Clock: clk, Observer: rec})
			objs := objects(100, 0)
			fetchEach(t, s, "role-a", objs)
			wantCalls(t, fake.ops(), map[string]int{batchSecrets: 100})

			fake.reset()
			clk.Step(store.DefaultFreshness)
			var got map[string]string
			if concurrent {
				got = fetchConcurrently(t, s, "role-a", objs)
			} else {
				got = fetchEach(t, s, "role-a", objs)
			}
			wantCalls(t, fake.ops(), map[string]int{listSecrets: 1})
			for i := range 100 {
				if n := fmt.Sprintf("s%d", i); got[n] != n+"@1" {
					t.Errorf("%s = %q, want %s@1", n, got[n], n)
				}
			}
			lists := fake.listCalls()
			if len(lists) == 1 && (len(lists[0].Prefixes) == 0 || len(lists[0].Prefixes) > 10 || lists[0].PageSize != 100) {
				t.Errorf("ListSecrets with name prefixes %q and MaxResults %d, want 1 to 10 prefixes and 100", lists[0].Prefixes, lists[0].PageSize)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if rec.calls["secrets manager/ListSecrets/ok"] != 1 {
				t.Errorf("calls heard %v, want one ListSecrets with outcome ok", rec.calls)
			}
		})
	}
}

// fetchConcurrently is fetchEach with every Fetch call at once.
func fetchConcurrently(t *testing.T, s *store.Store, identity string, objs []spec.Object) map[string]string {
	t.Helper()
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out = map[string]string{}
	)
	for _, o := range objs {
		wg.Go(func() {
			res, err := s.Fetch(t.Context(), request(identity, []spec.Object{o}))
			if err != nil {
				t.Errorf("%s: %v", o.Name, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for k, v := range contents(res) {
				out[k] = v
			}
		})
	}
	wg.Wait()
	return out
}

// TestListReadsChangedVersion: an object whose current version the listing
// shows moved is read (in a full batch of 20 names, the rest topped up with
// confirmed ones), the others are served from the cache.
func TestListReadsChangedVersion(t *testing.T) {
	fake := newFakeAWS(t)
	clk := clocktesting.NewFakeClock(time.Now())
	s := fastStore(fake.url, clk)
	objs := objects(100, 0)
	fetchEach(t, s, "role-a", objs)

	fake.reset()
	fake.set("s7", "2")
	clk.Step(store.DefaultFreshness)
	got := fetchEach(t, s, "role-a", objs)
	wantCalls(t, fake.ops(), map[string]int{listSecrets: 1, batchSecrets: 1})
	if got["s7"] != "s7@2" || got["s8"] != "s8@1" {
		t.Errorf("s7 = %q, s8 = %q; want s7@2 (changed) and s8@1", got["s7"], got["s8"])
	}
	if sizes := fake.batchSizes(); len(sizes) != 1 || sizes[0] != 20 {
		t.Errorf("BatchGetSecretValue names %v, want one full batch of 20", sizes)
	}
}

// TestListPaged: more objects than a ListSecrets page holds are listed in
// pages of 100.
func TestListPaged(t *testing.T) {
	fake := newFakeAWS(t)
	clk := clocktesting.NewFakeClock(time.Now())
	s := fastStore(fake.url, clk)
	objs := objects(250, 0)
	fetchEach(t, s, "role-a", objs)

	fake.reset()
	clk.Step(store.DefaultFreshness)
	got := fetchEach(t, s, "role-a", objs)
	wantCalls(t, fake.ops(), map[string]int{listSecrets: 3})
	if got["s249"] != "s249@1" {
		t.Errorf("s249 = %q, want s249@1", got["s249"])
	}
}

// TestListDeniedFallsBack: an identity denied ListSecrets is served as
// without revalidation by listing, and not asked again.
func TestListDeniedFallsBack(t *testing.T) {
	fake := newFakeAWS(t)
	fake.fault = func(c fakeCall) (int, any) {
		if c.Target == "secretsmanager.ListSecrets" {
			return apiError("AccessDeniedException")
		}
		return 0, nil
	}
	clk := clocktesting.NewFakeClock(time.Now())
	s := fastStore(fake.url, clk)
	objs := objects(10, 0)
	fetchEach(t, s, "role-a", objs)

	fake.reset()
	clk.Step(store.DefaultFreshness)
	fetchEach(t, s, "role-a", objs)
	wantCalls(t, fake.ops(), map[string]int{listSecrets: 1, batchSecrets: 10})

	fake.reset()
	fake.set("s3", "2")
	clk.Step(store.DefaultFreshness)
	got := fetchEach(t, s, "role-a", objs)
	wantCalls(t, fake.ops(), map[string]int{batchSecrets: 10})
	if got["s3"] != "s3@2" {
		t.Errorf("s3 = %q, want s3@2", got["s3"])
	}
}

// TestListFailingFallsBack: a ListSecrets that fails otherwise (here 500s,
// after the SDK's retries) leaves the values to the normal path, is not
// tried again by the other Mount calls of that freshness window, and is
// tried again in the next one.
func TestListFailingFallsBack(t *testing.T) {
	fake := newFakeAWS(t)
	fake.fault = func(c fakeCall) (int, any) {
		if c.Target == "secretsmanager.ListSecrets" {
			return apiError("500")
		}
		return 0, nil
	}
	clk := clocktesting.NewFakeClock(time.Now())
	s := fastStore(fake.url, clk)
	objs := objects(10, 0)
	fetchEach(t, s, "role-a", objs)
	for round := range 2 {
		fake.reset()
		fake.set("s3", fmt.Sprint(round+2))
		clk.Step(store.DefaultFreshness)
		got := fetchEach(t, s, "role-a", objs)
		wantCalls(t, fake.ops(), map[string]int{listSecrets: 1, batchSecrets: 10})
		if want := fmt.Sprintf("s3@%d", round+2); got["s3"] != want {
			t.Errorf("round %d: s3 = %q, want %s", round, got["s3"], want)
		}
	}
}

// TestListedAgeForcesBatchedReads: a value confirmed by listings only is
// read again once MaxListedAge passed since it was read, every due value in
// full batches of 20 and with no listing when all are due; values read at
// different times fall due together.
func TestListedAgeForcesBatchedReads(t *testing.T) {
	t.Run("read together", func(t *testing.T) {
		fake := newFakeAWS(t)
		clk := clocktesting.NewFakeClock(time.Now())
		s := fastStore(fake.url, clk)
		objs := objects(100, 0)
		fetchEach(t, s, "role-a", objs)
		steps := int(store.DefaultMaxListedAge / store.DefaultFreshness)
		for round := 1; round <= 2*steps; round++ {
			fake.reset()
			clk.Step(store.DefaultFreshness)
			fetchEach(t, s, "role-a", objs)
			want := map[string]int{listSecrets: 1}
			if round%steps == 0 {
				want = map[string]int{batchSecrets: 5}
			}
			t.Logf("step %d (%v after the first read)", round, time.Duration(round)*store.DefaultFreshness)
			wantCalls(t, fake.ops(), want)
			for _, n := range fake.batchSizes() {
				if n != 20 {
					t.Errorf("a BatchGetSecretValue of %d names, want 20", n)
				}
			}
		}
	})
	// 30 values read first, the 70 others later: when the 30 fall due, the
	// others are read with them if nearly due (half MaxListedAge), else
	// listed, 10 of them topped up into the 30's batches.
	for _, tt := range []struct {
		name  string
		later time.Duration
		want  map[string]int
	}{
		{"nearly due", store.DefaultMaxListedAge * 2 / 5, map[string]int{batchSecrets: 5}},
		{"not nearly due", store.DefaultMaxListedAge * 3 / 4, map[string]int{listSecrets: 1, batchSecrets: 2}},
	} {
		t.Run("read apart, "+tt.name, func(t *testing.T) {
			fake := newFakeAWS(t)
			clk := clocktesting.NewFakeClock(time.Now())
			s := fastStore(fake.url, clk)
			objs := objects(100, 0)
			fetchEach(t, s, "role-a", objs[:30])
			clk.Step(tt.later)
			fetchEach(t, s, "role-a", objs[30:])
			clk.Step(store.DefaultMaxListedAge - tt.later) // objs[:30] are due
			fake.reset()
			fetchEach(t, s, "role-a", objs)
			wantCalls(t, fake.ops(), tt.want)
			for _, n := range fake.batchSizes() {
				if n != 20 {
					t.Errorf("a BatchGetSecretValue of %d names, want 20", n)
				}
			}
		})
	}
}

// TestListNeverShared: a listing of one identity renews nothing of another,
// and one identity denied ListSecrets does not stop another's listings.
func TestListNeverShared(t *testing.T) {
	fake := newFakeAWS(t)
	fake.fault = func(c fakeCall) (int, any) {
		if c.Target == "secretsmanager.ListSecrets" && c.AccessKey == "AKIDROLEB" {
			return apiError("AccessDeniedException")
		}
		return 0, nil
	}
	clk := clocktesting.NewFakeClock(time.Now())
	s := fastStore(fake.url, clk)
	objs := objects(10, 0)
	roleB := func(o spec.Object) *store.Request {
		req := request("role-b", []spec.Object{o})
		req.Credentials = credentials.NewStaticCredentialsProvider("AKIDROLEB", "secret", "")
		return req
	}
	fetchB := func() map[string]string {
		out := map[string]string{}
		for _, o := range objs {
			res, err := s.Fetch(t.Context(), roleB(o))
			if err != nil {
				t.Fatalf("role-b %s: %v", o.Name, err)
			}
			for k, v := range contents(res) {
				out[k] = v
			}
		}
		return out
	}
	fetchEach(t, s, "role-a", objs)
	fetchB()

	for round, change := range []string{"", "s3"} {
		if change != "" {
			fake.set(change, "2")
		}
		clk.Step(store.DefaultFreshness)
		fake.reset()
		a := fetchEach(t, s, "role-a", objs)
		wantA := map[string]int{listSecrets: 1}
		if change != "" {
			wantA[batchSecrets] = 1
		}
		wantCalls(t, fake.ops(), wantA)
		fake.reset()
		b := fetchB()
		wantB := map[string]int{batchSecrets: 10}
		if round == 0 {
			wantB[listSecrets] = 1 // denied, then remembered
		}
		wantCalls(t, fake.ops(), wantB)
		if change != "" && (a[change] != change+"@2" || b[change] != change+"@2") {
			t.Errorf("after %s changed: role-a reads %q, role-b %q; want %s@2", change, a[change], b[change], change)
		}
	}
}
