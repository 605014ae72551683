package store_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/tests/motoserver"
)

const (
	getSecret      = "secretsmanager.GetSecretValue@us-east-1"
	describeSecret = "secretsmanager.DescribeSecret@us-east-1"
	batchSecrets   = "secretsmanager.BatchGetSecretValue@us-east-1"
)

// The tests of this file are about identities that may not call ListSecrets
// (or stores with revalidation by listing off): DescribeSecret is then what
// spares a GetSecretValue.

// noListStore is fastStore with revalidation by ListSecrets off.
func noListStore(endpoint string, clk *clocktesting.FakeClock) *store.Store {
	return store.New(store.Config{Endpoint: endpoint, MaxBackoff: 20 * time.Millisecond, Clock: clk, MaxListedAge: -1})
}

// refresh steps the clock past the freshness window and fetches again with
// current as the pod's mounted versions.
func refresh(t *testing.T, s *store.Store, clk *clocktesting.FakeClock, req *store.Request, current map[string]string) *store.Result {
	t.Helper()
	clk.Step(store.DefaultFreshness)
	req.Current = current
	res, err := s.Fetch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func wantCalls(t *testing.T, got, want map[string]int) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("store calls (-want +got):\n%s", diff)
	}
}

// TestDescribeSkipsUnchangedLabel: a label object whose mounted version is
// cached and still labeled costs one DescribeSecret on refresh.
func TestDescribeSkipsUnchangedLabel(t *testing.T) {
	fake := newFakeAWS(t)
	clk := clocktesting.NewFakeClock(time.Now())
	s := noListStore(fake.url, clk)
	req := request("role-a", []spec.Object{{Name: "s0", Type: spec.SecretsManager, FileName: "s0", VersionLabel: "blue", Mode: 0o644}})

	first, err := s.Fetch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	wantCalls(t, fake.byTarget(), map[string]int{getSecret: 1})

	fake.reset()
	res := refresh(t, s, clk, req, versions(first))
	wantCalls(t, fake.byTarget(), map[string]int{describeSecret: 1})
	if got := contents(res)["s0"]; got != "s0@1" {
		t.Errorf("s0 = %q, want s0@1", got)
	}
	// The confirmed value is fresh again: within the window no call at all.
	fake.reset()
	req.Current = versions(res)
	if _, err := s.Fetch(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, fake.byTarget(), map[string]int{})

	fake.reset()
	fake.set("s0", "2")
	res = refresh(t, s, clk, req, versions(res))
	wantCalls(t, fake.byTarget(), map[string]int{describeSecret: 1, getSecret: 1})
	if got, v := contents(res)["s0"], versions(res)["s0"]; got != "s0@2" || v != "2" {
		t.Errorf("s0 = %q version %q after the label moved, want s0@2 version 2", got, v)
	}

	fake.reset()
	refresh(t, s, clk, req, nil)
	wantCalls(t, fake.byTarget(), map[string]int{getSecret: 1})

	// A mounted version that is not cached is fetched, not described.
	fake.reset()
	refresh(t, s, clk, req, map[string]string{"s0": "7"})
	wantCalls(t, fake.byTarget(), map[string]int{getSecret: 1})
}

// TestDescribeWithoutBatches: "latest" objects use DescribeSecret only when
// the identity is denied BatchGetSecretValue.
func TestDescribeWithoutBatches(t *testing.T) {
	fake := newFakeAWS(t)
	clk := clocktesting.NewFakeClock(time.Now())
	s := noListStore(fake.url, clk)

	batched := request("role-batch", objects(2, 0))
	first, err := s.Fetch(t.Context(), batched)
	if err != nil {
		t.Fatal(err)
	}
	fake.reset()
	refresh(t, s, clk, batched, versions(first))
	wantCalls(t, fake.byTarget(), map[string]int{batchSecrets: 1})

	fake.mu.Lock()
	fake.fault = func(c fakeCall) (int, any) {
		if c.Target == "secretsmanager.BatchGetSecretValue" {
			return apiError("AccessDeniedException")
		}
		return 0, nil
	}
	fake.mu.Unlock()
	fake.reset()
	req := request("role-nobatch", objects(2, 0))
	first, err = s.Fetch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	wantCalls(t, fake.byTarget(), map[string]int{batchSecrets: 1, getSecret: 2})

	fake.reset()
	res := refresh(t, s, clk, req, versions(first))
	wantCalls(t, fake.byTarget(), map[string]int{describeSecret: 2})
	if diff := cmp.Diff(map[string]string{"s0": "s0@1", "s1": "s1@1"}, contents(res)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}

	fake.reset()
	fake.set("s1", "2")
	res = refresh(t, s, clk, req, versions(res))
	wantCalls(t, fake.byTarget(), map[string]int{describeSecret: 2, getSecret: 1})
	if got := contents(res)["s1"]; got != "s1@2" {
		t.Errorf("s1 = %q, want s1@2", got)
	}
}

// TestDescribeDenied: an identity denied DescribeSecret gets its values by
// GetSecretValue, and is not asked again.
func TestDescribeDenied(t *testing.T) {
	fake := newFakeAWS(t)
	fake.fault = func(c fakeCall) (int, any) {
		if c.Target == "secretsmanager.DescribeSecret" {
			return apiError("AccessDeniedException")
		}
		return 0, nil
	}
	clk := clocktesting.NewFakeClock(time.Now())
	s := noListStore(fake.url, clk)
	req := request("role-a", []spec.Object{{Name: "s0", Type: spec.SecretsManager, FileName: "s0", VersionLabel: "blue", Mode: 0o644}})
	first, err := s.Fetch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	fake.reset()
	res := refresh(t, s, clk, req, versions(first))
	wantCalls(t, fake.byTarget(), map[string]int{describeSecret: 1, getSecret: 1})
	if got := contents(res)["s0"]; got != "s0@1" {
		t.Errorf("s0 = %q, want s0@1", got)
	}
	fake.reset()
	refresh(t, s, clk, req, versions(res))
	wantCalls(t, fake.byTarget(), map[string]int{getSecret: 1})
}

// countingClient counts the operations per X-Amz-Target (an SDK retry,
// with the same invocation id, is the same operation).
type countingClient struct {
	mu    sync.Mutex
	calls map[string]int
	seen  map[string]bool
}

func (c *countingClient) Do(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if id := r.Header.Get("Amz-Sdk-Invocation-Id"); id == "" || !c.seen[id] {
		if c.seen == nil {
			c.seen = map[string]bool{}
		}
		c.seen[id] = true
		c.calls[r.Header.Get("X-Amz-Target")]++
	}
	c.mu.Unlock()
	return http.DefaultClient.Do(r)
}

func (c *countingClient) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls, c.seen = map[string]int{}, map[string]bool{}
	return out
}

func TestMotoDescribeLabel(t *testing.T) {
	f := setupMoto(t)
	clk := clocktesting.NewFakeClock(time.Now())
	hc := &countingClient{calls: map[string]int{}}
	s := store.New(store.Config{Endpoint: f.endpoint, Clock: clk, HTTPClient: hc, MaxListedAge: -1})
	req := motoRequest([]spec.Object{{Name: "multi", Type: spec.SecretsManager, FileName: "blue", VersionLabel: "blue"}})

	first, err := s.Fetch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	wantCalls(t, hc.take(), map[string]int{"secretsmanager.GetSecretValue": 1})

	res := refresh(t, s, clk, req, versions(first))
	wantCalls(t, hc.take(), map[string]int{"secretsmanager.DescribeSecret": 1})
	if got := contents(res)["blue"]; got != "two" {
		t.Errorf("blue = %q, want two", got)
	}

	sm := secretsmanager.New(secretsmanager.Options{Region: region, BaseEndpoint: aws.String(f.endpoint), Credentials: motoserver.Credentials()})
	if _, err := sm.UpdateSecretVersionStage(context.Background(), &secretsmanager.UpdateSecretVersionStageInput{
		SecretId: aws.String("multi"), VersionStage: aws.String("blue"),
		MoveToVersionId: aws.String(f.v1), RemoveFromVersionId: aws.String(f.v2),
	}); err != nil {
		t.Fatal(err)
	}
	res = refresh(t, s, clk, req, versions(res))
	wantCalls(t, hc.take(), map[string]int{"secretsmanager.DescribeSecret": 1, "secretsmanager.GetSecretValue": 1})
	if got, v := contents(res)["blue"], versions(res)["blue"]; got != "one" || v != f.v1 {
		t.Errorf("blue = %q version %q after the label moved, want one version %s", got, v, f.v1)
	}

	refresh(t, s, clk, req, nil)
	wantCalls(t, hc.take(), map[string]int{"secretsmanager.GetSecretValue": 1})
}
