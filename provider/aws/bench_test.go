package aws_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/internal/satoken/satokentest"
	"github.com/keymount/keymount/provider/aws"
	"github.com/keymount/keymount/provider/aws/identity"
	"github.com/keymount/keymount/provider/aws/noderegion"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/tests/motoserver"
)

const (
	benchPods    = 100
	benchSecrets = 10
)

// fakeSecrets is an in-process Secrets Manager speaking enough of the AWS
// JSON 1.1 protocol (BatchGetSecretValue, GetSecretValue) to serve secrets
// "bench-s<i>", counting the requests. Each value is a small JSON document
// naming the secret and its version.
type fakeSecrets struct {
	url      string
	requests atomic.Int64

	mu      sync.Mutex
	version map[string]string // name -> current version; absent means "v1"
}

func newFakeSecrets(tb testing.TB) *fakeSecrets {
	tb.Helper()
	f := &fakeSecrets{version: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(f.serve)) // listens on 127.0.0.1
	tb.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *fakeSecrets) serve(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	var in struct {
		SecretIDList []string `json:"SecretIdList"`
		SecretID     string   `json:"SecretId"`
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	switch r.Header.Get("X-Amz-Target") {
	case "secretsmanager.BatchGetSecretValue":
		values := make([]map[string]any, 0, len(in.SecretIDList))
		for _, n := range in.SecretIDList {
			values = append(values, f.secret(n))
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"SecretValues": values, "Errors": []any{}})
	case "secretsmanager.GetSecretValue":
		_ = json.NewEncoder(w).Encode(f.secret(in.SecretID))
	default:
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"__type": "UnknownOperationException"})
	}
}

func (f *fakeSecrets) current(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.version[name]; ok {
		return v
	}
	return "v1"
}

// set changes the value and version of name.
func (f *fakeSecrets) set(name, version string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version[name] = version
}

func (f *fakeSecrets) secret(name string) map[string]any {
	v := f.current(name)
	return map[string]any{
		"Name": name, "ARN": "arn:aws:secretsmanager:" + region + ":123456789012:secret:" + name,
		"VersionId": v, "SecretString": secretString(name, v),
	}
}

func secretString(name, version string) string {
	return fmt.Sprintf(`{"name":%q,"version":%q}`, name, version)
}

func (f *fakeSecrets) count() int64 { return f.requests.Load() }

// sharedIdentity is one identity for every pod, safe for concurrent use: the
// identity package has its own tests; the point here is the store.
type sharedIdentity struct{}

func (sharedIdentity) For(context.Context, *spec.Spec) (*identity.Identity, error) {
	return &identity.Identity{Key: "arn:aws:iam::123456789012:role/bench", Credentials: motoserver.Credentials()}, nil
}

func (sharedIdentity) Forget(string) {}

// benchObjects is the objects attribute of a class with n secrets.
func benchObjects(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "- objectName: bench-s%d\n  objectType: secretsmanager\n", i)
	}
	return b.String()
}

// mountRig is a provider wired like the real one (aws.New over store.New)
// against the fake, with a fake clock deciding freshness.
type mountRig struct {
	fake   *fakeSecrets
	clk    *clocktesting.FakeClock
	http   *awshttp.BuildableClient
	issuer *satokentest.Issuer
	// pods are the attributes of each pod's mount: pod i of service
	// account bench/app, with its own token.
	pods []map[string]string
}

func newMountRig(tb testing.TB) *mountRig {
	r := &mountRig{
		fake: newFakeSecrets(tb),
		clk:  clocktesting.NewFakeClock(time.Now()),
		// One transport for every store, as one provider process has: a
		// fresh store per iteration must not open fresh connections too.
		http:   awshttp.NewBuildableClient(),
		issuer: satokentest.New(tb, "https://kubernetes.default.svc.cluster.local"),
	}
	class := map[string]string{"objects": benchObjects(benchSecrets), "region": region}
	for i := range benchPods {
		r.pods = append(r.pods, podAttrs(tb, r.issuer, class, "bench", "app", fmt.Sprintf("app-%d", i), fmt.Sprintf("uid-%d", i)))
	}
	return r
}

func (r *mountRig) provider(tb testing.TB) *aws.Provider {
	tb.Helper()
	st := store.New(store.Config{Endpoint: r.fake.url, Clock: r.clk, HTTPClient: r.http})
	tokens, err := satoken.New(satoken.Config{}, r.issuer)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := aws.New(noderegion.New(noderegion.Config{Region: region}, nil), tokens, sharedIdentity{}, st)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// mountAll runs benchPods concurrent Mounts and returns the last result.
func (r *mountRig) mountAll(tb testing.TB, p *aws.Provider, current map[string]string) *server.MountResult {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		last *server.MountResult
	)
	for i := range benchPods {
		wg.Go(func() {
			res, err := p.Mount(context.Background(), &server.MountRequest{
				Attributes: r.pods[i], Permission: 0o644, CurrentVersions: current,
			})
			if err != nil {
				tb.Error(err)
				return
			}
			mu.Lock()
			last = res
			mu.Unlock()
		})
	}
	wg.Wait()
	return last
}

// versionsOf maps object id to version, as CurrentVersions wants them.
func versionsOf(res *server.MountResult) map[string]string {
	out := make(map[string]string, len(res.Versions))
	for _, v := range res.Versions {
		out[v.ID] = v.Version
	}
	return out
}

// BenchmarkMount100Pods: 100 pods sharing one identity mount 10 Secrets
// Manager secrets through aws.Provider.Mount. One op is the 100 concurrent
// Mounts; requests/op counts the requests the fake endpoint received.
//
//   - first: a fresh store (empty cache) per op.
//   - refresh-one-changed: one secret changed and the freshness window
//     passed since the previous round; the pods pass their CurrentVersions.
func BenchmarkMount100Pods(b *testing.B) {
	b.Run("first", func(b *testing.B) {
		rig := newMountRig(b)
		start := rig.fake.count()
		for b.Loop() {
			rig.mountAll(b, rig.provider(b), nil)
		}
		b.ReportMetric(float64(rig.fake.count()-start)/float64(b.N), "requests/op")
	})
	b.Run("refresh-one-changed", func(b *testing.B) {
		rig := newMountRig(b)
		p := rig.provider(b)
		current := versionsOf(rig.mountAll(b, p, nil))
		var requests int64
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			rig.fake.set("bench-s0", fmt.Sprintf("v%d", i+2))
			rig.clk.Step(store.DefaultFreshness)
			before := rig.fake.count()
			b.StartTimer()
			res := rig.mountAll(b, p, current)
			requests += rig.fake.count() - before
			if res != nil {
				current = versionsOf(res)
			}
		}
		b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
	})
}

// TestMount100PodsCostsFewRequests: refreshing 100 pods × 10 secrets of one
// identity, one secret changed, costs at most 3 store requests (DESIGN.md),
// and every pod gets the new value.
func TestMount100PodsCostsFewRequests(t *testing.T) {
	rig := newMountRig(t)
	p := rig.provider(t)

	first := rig.mountAll(t, p, nil)
	if t.Failed() {
		t.FailNow()
	}
	firstRequests := rig.fake.count()
	if len(first.Files) != benchSecrets {
		t.Fatalf("first mount: %d files, want %d", len(first.Files), benchSecrets)
	}

	rig.fake.set("bench-s0", "v2")
	rig.clk.Step(store.DefaultFreshness)
	before := rig.fake.count()
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		// results of every pod, to check each one got the new value
		results []*server.MountResult
	)
	for i := range benchPods {
		wg.Go(func() {
			res, err := p.Mount(t.Context(), &server.MountRequest{
				Attributes: rig.pods[i], Permission: 0o644, CurrentVersions: versionsOf(first),
			})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			results = append(results, res)
			mu.Unlock()
		})
	}
	wg.Wait()
	refresh := rig.fake.count() - before
	t.Logf("100 pods × %d secrets: first mount %d requests, refresh %d requests", benchSecrets, firstRequests, refresh)
	if refresh > 3 {
		t.Errorf("refresh cost %d store requests, want ≤ 3", refresh)
	}
	want := secretString("bench-s0", "v2")
	for _, res := range results {
		if v := versionsOf(res)["bench-s0"]; v != "v2" {
			t.Fatalf("bench-s0 version after refresh = %q, want v2", v)
		}
		for _, f := range res.Files {
			if f.Path == "bench-s0" && string(f.Contents) != want {
				t.Fatalf("bench-s0 after refresh = %q, want %q", f.Contents, want)
			}
		}
	}
	if len(results) != benchPods {
		t.Errorf("%d pods mounted, want %d", len(results), benchPods)
	}
	if got := rig.issuer.Reads(); got != 2 {
		t.Errorf("200 proven mounts read the issuer %d times, want 2 (discovery and keys, once)", got)
	}
}
