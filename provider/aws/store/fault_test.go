package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/provider/server"
)

func fastStore(endpoint string, clk *clocktesting.FakeClock) *store.Store {
	cfg := store.Config{Endpoint: endpoint, MaxBackoff: 20 * time.Millisecond}
	if clk != nil {
		cfg.Clock = clk
	}
	return store.New(cfg)
}

func request(identity string, objs []spec.Object) *store.Request {
	return &store.Request{Identity: identity, Credentials: fakeCreds(), Region: "us-east-1", Objects: objs}
}

// TestConcurrentPodsShareCalls: 100 pods of one identity mounting and then
// refreshing 10 secrets and 10 parameters cost one batch call per service.
func TestConcurrentPodsShareCalls(t *testing.T) {
	fake := newFakeAWS(t)
	clk := clocktesting.NewFakeClock(time.Now())
	s := fastStore(fake.url, clk)

	fetchAll := func(current map[string]string) []*store.Result {
		results := make([]*store.Result, 100)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				req := request("role-a", objects(10, 10))
				req.Current = current
				res, err := s.Fetch(t.Context(), req)
				if err != nil {
					t.Errorf("pod %d: %v", i, err)
					return
				}
				results[i] = res
			})
		}
		wg.Wait()
		return results
	}

	first := fetchAll(nil)
	if got := fake.count(); got > 3 {
		t.Errorf("first mount of 100 pods made %d store calls (%v), want <= 3", got, fake.byTarget())
	}
	if got := contents(first[99])["s3"]; got != "s3@1" {
		t.Errorf("s3 = %q, want s3@1", got)
	}

	fake.reset()
	fake.set("s3", "2")
	clk.Step(store.DefaultFreshness)
	refreshed := fetchAll(versions(first[0]))
	if got := fake.count(); got > 3 {
		t.Errorf("refresh of 100 pods made %d store calls (%v), want <= 3", got, fake.byTarget())
	}
	for i, res := range refreshed {
		if res != nil && contents(res)["s3"] != "s3@2" {
			t.Fatalf("pod %d: s3 = %q after refresh, want s3@2", i, contents(res)["s3"])
		}
	}

	// Within the freshness window nothing reaches the store.
	fake.reset()
	fetchAll(versions(refreshed[0]))
	if got := fake.count(); got != 0 {
		t.Errorf("fetch within the freshness window made %d store calls, want 0", got)
	}
}

// TestIdentitiesNeverShare: a second identity gets its own store calls.
func TestIdentitiesNeverShare(t *testing.T) {
	fake := newFakeAWS(t)
	s := fastStore(fake.url, nil)
	for _, id := range []string{"role-a", "role-b"} {
		if _, err := s.Fetch(t.Context(), request(id, objects(1, 1))); err != nil {
			t.Fatal(err)
		}
	}
	if got := fake.count(); got != 4 {
		t.Errorf("two identities made %d calls, want 4 (no sharing)", got)
	}
}

func TestRetriesThrottlingAnd5xx(t *testing.T) {
	for _, fault := range []string{"ThrottlingException", "503", "500"} {
		t.Run(fault, func(t *testing.T) {
			fake := newFakeAWS(t)
			var mu sync.Mutex
			failed := map[string]int{}
			fake.fault = func(c fakeCall) (int, any) {
				mu.Lock()
				defer mu.Unlock()
				if failed[c.Target] < 2 {
					failed[c.Target]++
					return apiError(fault)
				}
				return 0, nil
			}
			s := fastStore(fake.url, nil)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			res, err := s.Fetch(ctx, request("role", objects(2, 2)))
			if err != nil {
				t.Fatalf("Fetch after 2 faults per call: %v", err)
			}
			if got := contents(res)["p1"]; got != "p1@1" {
				t.Errorf("p1 = %q", got)
			}
			if got := fake.count(); got != 6 {
				t.Errorf("%d calls, want 6 (2 retried twice each)", got)
			}
		})
	}
}

func TestPersistentFaults(t *testing.T) {
	tests := []struct {
		fault string
		code  codes.Code
		is    error
	}{
		{"ThrottlingException", codes.ResourceExhausted, store.ErrThrottled},
		{"503", codes.Unavailable, store.ErrUnavailable},
		{"AccessDeniedException", codes.PermissionDenied, server.ErrPermissionDenied},
	}
	for _, tt := range tests {
		t.Run(tt.fault, func(t *testing.T) {
			fake := newFakeAWS(t)
			fake.fault = func(fakeCall) (int, any) { return apiError(tt.fault) }
			s := fastStore(fake.url, nil)
			_, err := s.Fetch(t.Context(), request("role", objects(1, 1)))
			if status.Code(err) != tt.code || !errors.Is(err, tt.is) {
				t.Fatalf("Fetch = %v (code %v), want code %v wrapping %v", err, status.Code(err), tt.code, tt.is)
			}
			for _, want := range []string{"s0: ", "p0: "} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}
}

// TestBatchDeniedFallsBack: an IAM policy written for the existing provider
// grants GetSecretValue but not BatchGetSecretValue (nor ListSecrets).
func TestBatchDeniedFallsBack(t *testing.T) {
	fake := newFakeAWS(t)
	fake.fault = func(c fakeCall) (int, any) {
		if c.Target == "secretsmanager.BatchGetSecretValue" || c.Target == "secretsmanager.ListSecrets" {
			return apiError("AccessDeniedException")
		}
		return 0, nil
	}
	clk := clocktesting.NewFakeClock(time.Now())
	s := fastStore(fake.url, clk)
	if _, err := s.Fetch(t.Context(), request("role", objects(3, 0))); err != nil {
		t.Fatal(err)
	}
	fake.reset()
	clk.Step(time.Minute)
	res, err := s.Fetch(t.Context(), request("role", objects(3, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if got := contents(res)["s2"]; got != "s2@1" {
		t.Errorf("s2 = %q", got)
	}
	if got := fake.byTarget(); got["secretsmanager.BatchGetSecretValue@us-east-1"] != 0 || got["secretsmanager.GetSecretValue@us-east-1"] != 3 {
		t.Errorf("calls after a denied batch = %v, want 3 GetSecretValue and no batch", got)
	}
}

func TestFailoverOncePerBatch(t *testing.T) {
	fake := newFakeAWS(t)
	fake.fault = func(c fakeCall) (int, any) {
		if c.Region == "us-east-1" {
			return apiError("503")
		}
		return 0, nil
	}
	s := fastStore(fake.url, nil)
	objs := objects(25, 12)
	objs[0].Failover = &spec.Failover{Name: "s0-replica"}
	req := request("role", objs)
	req.FailoverRegion = "us-west-2"
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res, err := s.Fetch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := contents(res)["s0"]; got != "s0-replica@1" {
		t.Errorf("s0 = %q, want the failover object s0-replica@1", got)
	}
	got := fake.byTarget()
	want := map[string]int{
		// 25 secrets are 2 batches, 12 parameters 2 batches; 5 attempts each.
		"secretsmanager.BatchGetSecretValue@us-east-1": 2 * store.DefaultMaxAttempts,
		"AmazonSSM.GetParameters@us-east-1":            2 * store.DefaultMaxAttempts,
		"secretsmanager.BatchGetSecretValue@us-west-2": 2,
		"AmazonSSM.GetParameters@us-west-2":            2,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d calls, want %d (all: %v)", k, got[k], n, got)
		}
	}
}

func TestDeadlineExceeded(t *testing.T) {
	fake := newFakeAWS(t)
	fake.fault = func(fakeCall) (int, any) {
		time.Sleep(2 * time.Second)
		return 0, nil
	}
	s := fastStore(fake.url, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Fetch(ctx, request("role", objects(1, 1)))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Fetch = %v (code %v), want DeadlineExceeded", err, status.Code(err))
	}
	if elapsed := time.Since(start); elapsed > 1500*time.Millisecond {
		t.Errorf("Fetch returned after %v, not at the deadline", elapsed)
	}
}

// TestRetriesStopAtDeadline: a store that keeps throttling is not retried
// past the caller's deadline.
func TestRetriesStopAtDeadline(t *testing.T) {
	fake := newFakeAWS(t)
	fake.fault = func(fakeCall) (int, any) { return apiError("ThrottlingException") }
	s := store.New(store.Config{Endpoint: fake.url, MaxBackoff: 10 * time.Second, MaxAttempts: 50})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Fetch(ctx, request("role", objects(1, 0)))
	if err == nil {
		t.Fatal("Fetch succeeded against a throttling store")
	}
	if c := status.Code(err); c != codes.DeadlineExceeded && c != codes.ResourceExhausted {
		t.Errorf("code %v, want DeadlineExceeded or ResourceExhausted", c)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("retries ran %v past a 300ms deadline", elapsed)
	}
}

func TestNotFoundNamesEveryObject(t *testing.T) {
	fake := newFakeAWS(t)
	fake.missing["s1"], fake.missing["p0"] = true, true
	s := fastStore(fake.url, nil)
	_, err := s.Fetch(t.Context(), request("role", objects(2, 2)))
	if status.Code(err) != codes.NotFound || !errors.Is(err, server.ErrNotFound) {
		t.Fatalf("Fetch = %v, want NotFound", err)
	}
	for _, want := range []string{"s1: not found", "p0: not found"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "s0@") {
		t.Errorf("error %q leaks a value", err)
	}
}
