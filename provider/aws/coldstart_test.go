package aws_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"k8s.io/client-go/rest"

	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/internal/satoken/satokentest"
	"github.com/keymount/keymount/provider/aws"
	"github.com/keymount/keymount/provider/aws/identity"
	"github.com/keymount/keymount/provider/aws/kubeclient"
	"github.com/keymount/keymount/provider/aws/noderegion"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/provider/server"
)

// coldIdentities is the number of pods, each with its own service account,
// that start at once.
const coldIdentities = 100

// coldRig wires a provider as cmd/keymount-provider-aws does (the SDK
// configuration from the environment, kubeclient with the flags' default
// rate limits, IRSA through STS, the store) against fakeAWS and fakeKube.
type coldRig struct {
	aws  *fakeAWS
	kube *fakeKube
}

func newColdRig(tb testing.TB) *coldRig {
	return &coldRig{aws: newFakeAWS(tb), kube: newFakeKube(tb)}
}

// provider is a freshly started provider: empty caches, a full rate
// limiter, new connections.
func (r *coldRig) provider(tb testing.TB) *aws.Provider {
	tb.Helper()
	cs, err := kubeclient.ForConfig(&rest.Config{Host: r.kube.url}, kubeclient.DefaultQPS, kubeclient.DefaultBurst)
	if err != nil {
		tb.Fatal(err)
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithAppID("keymount-bench"))
	if err != nil {
		tb.Fatal(err)
	}
	st := store.New(store.Config{AWS: awsCfg, Endpoint: r.aws.url})
	ids := identity.New(identity.Config{AWS: awsCfg, STSEndpoint: r.aws.url, Outages: st},
		identity.NewKubeServiceAccounts(cs, identity.DefaultServiceAccountTTL))
	tokens, err := satoken.New(satoken.Config{}, cs)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := aws.New(noderegion.New(noderegion.Config{Region: region}, cs), tokens, ids, st)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// coldMount is the mount request of pod i of round, whose service account
// is its own: what the driver sends for an IRSA class of benchSecrets
// secrets, with a token kubelet would hand (signed by the issuer, bound to
// the pod).
func (r *coldRig) coldMount(tb testing.TB, round, i int) *server.MountRequest {
	sa := fmt.Sprintf("sa-%d-%d", round, i)
	return &server.MountRequest{
		Attributes: podAttrs(tb, r.kube.issuer, map[string]string{
			spec.KeyObjects: benchObjects(benchSecrets), spec.KeyRegion: region,
		}, "bench", sa, "pod-"+sa, fmt.Sprintf("uid-%d-%d", round, i)),
		Permission: 0o644,
	}
}

// podAttrs adds to attrs the pod attributes kubelet sets and a token of
// audience sts.amazonaws.com signed by iss for that pod.
func podAttrs(tb testing.TB, iss *satokentest.Issuer, attrs map[string]string, ns, sa, pod, uid string) map[string]string {
	tb.Helper()
	tok := iss.Sign(tb, satokentest.Token{Audiences: []string{identity.AudienceSTS}, Namespace: ns, ServiceAccount: sa, PodName: pod, PodUID: uid})
	return withToken(tb, withPod(attrs, ns, sa, pod, uid), identity.AudienceSTS, tok)
}

// withPod returns a copy of attrs with the pod attributes kubelet sets.
func withPod(attrs map[string]string, ns, sa, pod, uid string) map[string]string {
	out := maps.Clone(attrs)
	out[spec.KeyPodNamespace], out[spec.KeyServiceAccount], out[spec.KeyPodName], out[spec.KeyPodUID] = ns, sa, pod, uid
	return out
}

// withToken returns a copy of attrs whose tokens attribute holds tok for
// audience ("" for no tokens attribute).
func withToken(tb testing.TB, attrs map[string]string, audience, tok string) map[string]string {
	tb.Helper()
	out := maps.Clone(attrs)
	if tok == "" {
		delete(out, spec.KeyTokens)
		return out
	}
	tokens, err := json.Marshal(map[string]any{audience: map[string]string{
		"token": tok, "expirationTimestamp": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	}})
	if err != nil {
		tb.Fatal(err)
	}
	out[spec.KeyTokens] = string(tokens)
	return out
}

// coldMounts are the requests of the coldIdentities pods of round.
func (r *coldRig) coldMounts(tb testing.TB, round int) []*server.MountRequest {
	reqs := make([]*server.MountRequest, coldIdentities)
	for i := range reqs {
		reqs[i] = r.coldMount(tb, round, i)
	}
	return reqs
}

// mountColdStart mounts the pods of reqs at once and returns the latency
// of each mount.
func mountColdStart(tb testing.TB, p *aws.Provider, reqs []*server.MountRequest) []time.Duration {
	lat := make([]time.Duration, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() {
			start := time.Now()
			res, err := p.Mount(context.Background(), req)
			lat[i] = time.Since(start)
			if err != nil {
				tb.Errorf("pod %d: %v", i, err)
				return
			}
			if len(res.Files) != benchSecrets {
				tb.Errorf("pod %d: %d files, want %d", i, len(res.Files), benchSecrets)
			}
		})
	}
	wg.Wait()
	return lat
}

// BenchmarkColdStart100Identities: a provider just started mounts 100
// pods at once, each of its own service account (IRSA), each pod's class
// naming 10 Secrets Manager secrets. Each mount reads its service account
// through the Kubernetes client with the default --qps/--burst, exchanges
// its token at STS and makes one BatchGetSecretValue, all against
// in-process endpoints on 127.0.0.1; its token (signed, pod-bound) is
// verified with the issuer keys, read once per provider. One op is the 100 concurrent mounts
// of a new provider (built with the timer stopped); mounts/s is 100 over
// the op's time, p50-ms and p99-ms the latency of one mount.
func BenchmarkColdStart100Identities(b *testing.B) {
	rig := newColdRig(b)
	var (
		lat     []time.Duration
		elapsed time.Duration
		round   int
	)
	for b.Loop() {
		b.StopTimer()
		p := rig.provider(b)
		round++
		reqs := rig.coldMounts(b, round)
		b.StartTimer()
		start := time.Now()
		lat = append(lat, mountColdStart(b, p, reqs)...)
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(coldIdentities*round)/elapsed.Seconds(), "mounts/s")
	slices.Sort(lat)
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(float64(rig.aws.sts.Load())/float64(round), "sts/op")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TestColdStartIdentitiesRunTogether: 100 pods of new service accounts
// mounting at once cost one service account read, one STS exchange and one
// batch each, and all 100 exchanges are in flight together (the fake STS
// holds each until the hundredth arrives): nothing serializes identities.
// Proving the 100 tokens costs two API requests (the issuer's discovery
// document and keys), and a second round of 100 new identities none.
func TestColdStartIdentitiesRunTogether(t *testing.T) {
	rig := newColdRig(t)
	rig.aws.stsBarrier = coldIdentities
	p := rig.provider(t)
	mountColdStart(t, p, rig.coldMounts(t, 1))
	if t.Failed() {
		t.FailNow()
	}
	if got := rig.kube.reads.Load(); got != coldIdentities {
		t.Errorf("service account reads = %d, want %d", got, coldIdentities)
	}
	if got := rig.kube.requests.Load(); got != coldIdentities+2 {
		t.Errorf("API requests = %d, want %d (a service account read per identity, discovery and keys once)", got, coldIdentities+2)
	}
	if got := rig.aws.sts.Load(); got != coldIdentities {
		t.Errorf("STS exchanges = %d, want %d", got, coldIdentities)
	}
	if got := rig.aws.stsPeak.Load(); got != coldIdentities {
		t.Errorf("at most %d STS exchanges were in flight together, want %d", got, coldIdentities)
	}
	if got := rig.aws.smBatch.Load(); got != coldIdentities {
		t.Errorf("BatchGetSecretValue calls = %d, want %d (one per identity)", got, coldIdentities)
	}
	before := rig.kube.requests.Load()
	mountColdStart(t, p, rig.coldMounts(t, 2))
	if got := rig.kube.requests.Load() - before; got != coldIdentities {
		t.Errorf("API requests of a second round = %d, want %d (the service account reads; no token costs any)", got, coldIdentities)
	}
}
