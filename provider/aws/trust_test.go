package aws_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keymount/keymount/internal/satoken/satokentest"
	"github.com/keymount/keymount/provider/aws"
	"github.com/keymount/keymount/provider/aws/identity"
	"github.com/keymount/keymount/provider/aws/noderegion"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/tests/poll"
)

// The legitimate pod of the trust tests: shop/web of service account app.
const (
	trustNS, trustSA, trustPod, trustUID = "shop", "app", "web", "uid-web"
)

func legitToken() satokentest.Token {
	return satokentest.Token{Audiences: []string{identity.AudienceSTS}, Namespace: trustNS, ServiceAccount: trustSA,
		PodName: trustPod, PodUID: trustUID}
}

// attack is a token an attacker on the node presents while naming the
// legitimate pod, and the error it must get.
type attack struct {
	name  string
	token func(tb testing.TB, iss, foreign *satokentest.Issuer) string
	is    error
}

func signedWith(mod func(*satokentest.Token)) func(testing.TB, *satokentest.Issuer, *satokentest.Issuer) string {
	return func(tb testing.TB, iss, _ *satokentest.Issuer) string {
		t := legitToken()
		mod(&t)
		return iss.Sign(tb, t)
	}
}

// attacks are the bad tokens of issue 18 point 1.
var attacks = []attack{
	{"no token", func(testing.TB, *satokentest.Issuer, *satokentest.Issuer) string { return "" }, server.ErrInvalidParameters},
	{"garbage", func(testing.TB, *satokentest.Issuer, *satokentest.Issuer) string { return "fake-web-identity-token" }, server.ErrPermissionDenied},
	{"expired", signedWith(func(t *satokentest.Token) {
		t.IssuedAt, t.Expiry = time.Now().Add(-3*time.Hour), time.Now().Add(-2*time.Hour)
	}), server.ErrPermissionDenied},
	{"not yet valid", signedWith(func(t *satokentest.Token) { t.NotBefore = time.Now().Add(time.Hour) }), server.ErrPermissionDenied},
	{"wrong audience", signedWith(func(t *satokentest.Token) { t.Audiences = []string{"vault"} }), server.ErrPermissionDenied},
	{"other service account", signedWith(func(t *satokentest.Token) { t.ServiceAccount = "other" }), server.ErrPermissionDenied},
	{"other pod", signedWith(func(t *satokentest.Token) { t.PodName, t.PodUID = "web-2", "uid-web-2" }), server.ErrPermissionDenied},
	{"foreign issuer", func(tb testing.TB, _, foreign *satokentest.Issuer) string { return foreign.Sign(tb, legitToken()) }, server.ErrPermissionDenied},
	{"alg none", func(tb testing.TB, iss, _ *satokentest.Issuer) string {
		return iss.Unsigned(tb, iss.Claims(legitToken()))
	}, server.ErrPermissionDenied},
	{"HS256 with the public key", func(tb testing.TB, iss, _ *satokentest.Issuer) string { return iss.HMAC(tb, iss.Claims(legitToken())) }, server.ErrPermissionDenied},
}

// awsCounts is what the AWS endpoint and the API server answered.
type awsCounts struct{ sts, batch, get, saReads int64 }

func (r *coldRig) counts() awsCounts {
	return awsCounts{r.aws.sts.Load(), r.aws.smBatch.Load(), r.aws.smGet.Load(), r.kube.reads.Load()}
}

// TestMountRefusesUnprovenTokens: each bad token naming the legitimate pod
// is refused with its code, with no file, no STS exchange, no store call
// and no service account read, whether the legitimate pod's mount warmed
// every cache (credentials, role, values, keys) or not.
func TestMountRefusesUnprovenTokens(t *testing.T) {
	class := map[string]string{spec.KeyObjects: benchObjects(3), spec.KeyRegion: region}
	for _, warm := range []bool{false, true} {
		rig := newColdRig(t)
		foreign := satokentest.New(t, "https://evil.example")
		p := rig.provider(t)
		if warm {
			res, err := p.Mount(t.Context(), &server.MountRequest{Permission: 0o644,
				Attributes: withToken(t, withPod(class, trustNS, trustSA, trustPod, trustUID), identity.AudienceSTS, rig.kube.issuer.Sign(t, legitToken()))})
			if err != nil || len(res.Files) != 3 {
				t.Fatalf("legitimate mount: %v", err)
			}
		}
		before := rig.counts()
		for _, a := range attacks {
			tok := a.token(t, rig.kube.issuer, foreign)
			attrs := withToken(t, withPod(class, trustNS, trustSA, trustPod, trustUID), identity.AudienceSTS, tok)
			res, err := p.Mount(t.Context(), &server.MountRequest{Attributes: attrs, Permission: 0o644})
			if !errors.Is(err, a.is) || res != nil {
				t.Errorf("warm %v, %s: Mount = %v, %v; want %v and no files", warm, a.name, res, err, a.is)
				continue
			}
			if tok != "" && strings.Contains(err.Error(), tok) {
				t.Errorf("warm %v, %s: the error quotes the token", warm, a.name)
			}
		}
		if after := rig.counts(); after != before {
			t.Errorf("warm %v: the attacks cost AWS and API requests: %+v before, %+v after", warm, before, after)
		}
	}
}

// TestBadTokenDoesNotJoinExchange: while the legitimate pod's STS exchange
// is in flight, an attacker naming the same identity is refused at once,
// without joining it; the exchange then serves its pod.
func TestBadTokenDoesNotJoinExchange(t *testing.T) {
	rig := newColdRig(t)
	rig.aws.stsBarrier = 2 // holds the legitimate exchange until a second one arrives
	p := rig.provider(t)
	class := map[string]string{spec.KeyObjects: benchObjects(2), spec.KeyRegion: region}
	legit := withToken(t, withPod(class, trustNS, trustSA, trustPod, trustUID), identity.AudienceSTS, rig.kube.issuer.Sign(t, legitToken()))
	var (
		wg       sync.WaitGroup
		legitErr error
	)
	wg.Go(func() {
		_, legitErr = p.Mount(t.Context(), &server.MountRequest{Attributes: legit, Permission: 0o644})
	})
	if err := poll.Wait(t.Context(), time.Minute, func(context.Context) (bool, error) {
		return rig.aws.stsInFlight.Load() == 1, nil
	}); err != nil {
		t.Fatalf("the legitimate exchange never reached STS: %v", err)
	}
	garbage := withToken(t, legit, identity.AudienceSTS, "fake-web-identity-token")
	if _, err := p.Mount(t.Context(), &server.MountRequest{Attributes: garbage, Permission: 0o644}); !errors.Is(err, server.ErrPermissionDenied) {
		t.Errorf("garbage token during the legitimate exchange: %v, want PermissionDenied", err)
	}
	if got := rig.aws.stsInFlight.Load(); got != 1 {
		t.Errorf("%d exchanges in flight after the attack, want 1 (the legitimate one, still held)", got)
	}
	// Another legitimate identity releases the barrier.
	other := withToken(t, withPod(class, trustNS, "other", "other-0", "uid-other"), identity.AudienceSTS,
		rig.kube.issuer.Sign(t, satokentest.Token{Audiences: []string{identity.AudienceSTS}, Namespace: trustNS, ServiceAccount: "other",
			PodName: "other-0", PodUID: "uid-other"}))
	if _, err := p.Mount(t.Context(), &server.MountRequest{Attributes: other, Permission: 0o644}); err != nil {
		t.Errorf("second identity: %v", err)
	}
	wg.Wait()
	if legitErr != nil {
		t.Errorf("legitimate mount: %v", legitErr)
	}
	if got := rig.aws.sts.Load(); got != 2 {
		t.Errorf("%d STS exchanges, want 2", got)
	}
}

// TestValuesNotSharedAcrossIdentities: a value one identity fetched is
// not served to another identity of the same role without a store call
// signed with the other's credentials.
func TestValuesNotSharedAcrossIdentities(t *testing.T) {
	rig := newColdRig(t)
	p := rig.provider(t)
	class := map[string]string{spec.KeyObjects: benchObjects(2), spec.KeyRegion: region}
	for i, sa := range []string{"app", "app2"} {
		tok := rig.kube.issuer.Sign(t, satokentest.Token{Audiences: []string{identity.AudienceSTS}, Namespace: trustNS, ServiceAccount: sa,
			PodName: sa + "-0", PodUID: "uid-" + sa})
		attrs := withToken(t, withPod(class, trustNS, sa, sa+"-0", "uid-"+sa), identity.AudienceSTS, tok)
		if _, err := p.Mount(t.Context(), &server.MountRequest{Attributes: attrs, Permission: 0o644}); err != nil {
			t.Fatalf("%s: %v", sa, err)
		}
		if got := rig.aws.smBatch.Load(); got != int64(i+1) {
			t.Errorf("after %s: %d store calls, want %d", sa, got, i+1)
		}
	}
	// fakeAWS names the credentials of its n-th exchange ASIAFAKE<n>.
	for _, key := range []string{"ASIAFAKE000000000001", "ASIAFAKE000000000002"} {
		if got := rig.aws.signedBy(key); got != 1 {
			t.Errorf("store calls signed by %s: %d, want 1", key, got)
		}
	}
}

// countingIdentities counts the identities asked for.
type countingIdentities struct {
	staticIdentity
	mu    sync.Mutex
	asked int
}

func (c *countingIdentities) For(ctx context.Context, s *spec.Spec) (*identity.Identity, error) {
	c.mu.Lock()
	c.asked++
	c.mu.Unlock()
	return c.staticIdentity.For(ctx, s)
}

// TestPodIdentityNeedsPodBoundToken: an EKS Pod Identity mount, whose
// credentials are one pod's, is refused a token bound to no pod before
// any credentials are asked for; the pod's own token is accepted.
func TestPodIdentityNeedsPodBoundToken(t *testing.T) {
	tokens, iss := newVerifier(t)
	ids := &countingIdentities{}
	p, err := aws.New(noderegion.New(noderegion.Config{Region: region}, nil), tokens, ids, unusedStore{})
	if err != nil {
		t.Fatal(err)
	}
	class := withPod(map[string]string{spec.KeyObjects: benchObjects(1), spec.KeyRegion: region, "usePodIdentity": "true"},
		trustNS, trustSA, trustPod, trustUID)
	unbound := legitToken()
	unbound.Audiences, unbound.PodName, unbound.PodUID = []string{identity.AudiencePodIdentity}, "", ""
	_, err = p.Mount(t.Context(), &server.MountRequest{Permission: 0o644,
		Attributes: withToken(t, class, identity.AudiencePodIdentity, iss.Sign(t, unbound))})
	if !errors.Is(err, server.ErrPermissionDenied) || ids.asked != 0 {
		t.Errorf("unbound token: %v, identities asked %d; want PermissionDenied and none", err, ids.asked)
	}
	bound := legitToken()
	bound.Audiences = []string{identity.AudiencePodIdentity}
	_, err = p.Mount(t.Context(), &server.MountRequest{Permission: 0o644,
		Attributes: withToken(t, class, identity.AudiencePodIdentity, iss.Sign(t, bound))})
	if !errors.Is(err, errUnusedStore) || ids.asked != 1 {
		t.Errorf("pod-bound token: %v, identities asked %d; want the store reached once", err, ids.asked)
	}
}

var errUnusedStore = errors.New("store reached")

// unusedStore fails every fetch with errUnusedStore.
type unusedStore struct{}

func (unusedStore) Fetch(context.Context, *store.Request) (*store.Result, error) {
	return nil, errUnusedStore
}
