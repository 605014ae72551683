package identity

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"google.golang.org/grpc/codes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/tests/motoserver"
)

const (
	// targetRole is the class's assumeRoleArn, in another account.
	targetRole = "arn:aws:iam::210987654321:role/secrets-reader"
	// deniedRole is a role whose trust policy admits no one (denyingSTS).
	deniedRole = "arn:aws:iam::210987654321:role/not-for-you"
)

// stsRequest is one STS request seen on the wire.
type stsRequest struct {
	action    string
	form      url.Values
	accessKey string // of the Authorization header, "" when unsigned
}

// stsRecorder records STS requests by action. With deny, an AssumeRole of
// deniedRole is answered as STS answers when the role's trust policy does
// not admit the caller: moto's STS assumes any role (it evaluates no trust
// policy, not even in its IAM authorization mode), so the refusal comes
// from here.
type stsRecorder struct {
	next http.RoundTripper
	deny bool

	mu   sync.Mutex
	seen []stsRequest
}

func (s *stsRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	_ = req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(body))
	form, _ := url.ParseQuery(string(body))
	r := stsRequest{action: form.Get("Action"), form: form, accessKey: accessKeyOf(req.Header.Get("Authorization"))}
	s.mu.Lock()
	s.seen = append(s.seen, r)
	s.mu.Unlock()
	if s.deny && r.action == "AssumeRole" && form.Get("RoleArn") == deniedRole {
		return &http.Response{
			StatusCode: http.StatusForbidden, Request: req, Header: http.Header{"Content-Type": {"text/xml"}},
			Body: io.NopCloser(strings.NewReader(`<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>` +
				`<Message>User is not authorized to perform: sts:AssumeRole on resource: ` + deniedRole + `</Message></Error></ErrorResponse>`)),
		}, nil
	}
	return s.next.RoundTrip(req)
}

// requests returns the requests of action seen so far.
func (s *stsRecorder) requests(action string) []stsRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []stsRequest
	for _, r := range s.seen {
		if r.action == action {
			out = append(out, r)
		}
	}
	return out
}

// accessKeyOf extracts the access key of a SigV4 Authorization header.
func accessKeyOf(auth string) string {
	_, cred, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return ""
	}
	key, _, _ := strings.Cut(cred, "/")
	return key
}

func assumeSpec(ns, sa, pod, role string) *spec.Spec {
	s := irsaSpec(ns, sa, pod)
	s.AssumeRoleARN = role
	return s
}

// TestAssumeRoleArn runs a class's assumeRoleArn against moto_server's STS.
func TestAssumeRoleArn(t *testing.T) {
	endpoint := motoserver.Start(t)
	sas := &fakeServiceAccounts{roles: map[string]string{"ns1/app-a": roleA, "ns2/app-a": roleA}}
	newResolver := func(t *testing.T, cfg Config) (*Resolver, *stsRecorder) {
		t.Helper()
		rec := &stsRecorder{next: http.DefaultTransport, deny: true}
		cfg.STSEndpoint, cfg.HTTPClient = endpoint, &http.Client{Transport: rec}
		return New(cfg, sas), rec
	}

	t.Run("the store calls run as the assumed role", func(t *testing.T) { testAssumeStoreCalls(t, newResolver, endpoint) })
	t.Run("one AssumeRole per identity and role across many mounts", func(t *testing.T) { testAssumeOncePerPair(t, newResolver) })
	t.Run("renews shortly before expiry", func(t *testing.T) { testAssumeRenewal(t, newResolver) })
	t.Run("a role whose trust policy refuses the pod", func(t *testing.T) { testAssumeRefused(t, newResolver) })
	t.Run("forget drops the assumed role's credentials only", func(t *testing.T) { testAssumeForget(t, newResolver) })
	t.Run("from EKS Pod Identity", func(t *testing.T) { testAssumeFromPodIdentity(t, newResolver) })
}

// testAssumeFromPodIdentity: with usePodIdentity, the agent's credentials
// sign AssumeRole, and the assumed role is cached per pod, as the agent's
// credentials are.
func testAssumeFromPodIdentity(t *testing.T, newResolver resolverFactory) {
	a := newAgent(t, time.Now().Add(time.Hour))
	r, rec := newResolver(t, Config{PodIdentityEndpointIPv4: a.url})
	s := podSpec("ns1", "app-a", spec.AddressIPv4)
	s.Region, s.AssumeRoleARN = "eu-west-1", targetRole
	for range 3 {
		if _, err := r.For(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	other := podSpec("ns1", "app-a", spec.AddressIPv4)
	other.PodName, other.PodUID, other.Region, other.AssumeRoleARN = "q", "uid-q", "eu-west-1", targetRole
	id, err := r.For(t.Context(), other)
	if err != nil {
		t.Fatal(err)
	}
	calls := rec.requests("AssumeRole")
	if len(calls) != 2 {
		t.Fatalf("AssumeRole requests for 4 mounts of 2 pods = %d, want 2", len(calls))
	}
	for _, c := range calls {
		if c.accessKey != agentKeyID {
			t.Errorf("AssumeRole signed with %q, want the agent's %q", c.accessKey, agentKeyID)
		}
	}
	if !strings.HasPrefix(id.Key, "podidentity:ns1/app-a/q/uid-q"+assumeKeySep) {
		t.Errorf("key = %q, want the pod's identity and the role", id.Key)
	}
}

// resolverFactory returns a Resolver against moto and its STS recorder.
type resolverFactory func(t *testing.T, cfg Config) (*Resolver, *stsRecorder)

// testAssumeStoreCalls: the store calls run as the assumed role.
func testAssumeStoreCalls(t *testing.T, newResolver resolverFactory, endpoint string) {
	r, rec := newResolver(t, Config{})
	own, err := r.For(t.Context(), irsaSpec("ns1", "app-a", "web-0"))
	if err != nil {
		t.Fatal(err)
	}
	ownCreds, _ := own.Credentials.Retrieve(t.Context())
	id, err := r.For(t.Context(), assumeSpec("ns1", "app-a", "web-0", targetRole))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := id.Credentials.Retrieve(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	calls := rec.requests("AssumeRole")
	if len(calls) != 1 {
		t.Fatalf("AssumeRole requests = %d, want 1", len(calls))
	}
	if got := calls[0].accessKey; got == "" || got != ownCreds.AccessKeyID {
		t.Errorf("AssumeRole signed with access key %q, want the pod's own %q", got, ownCreds.AccessKeyID)
	}
	if got := calls[0].form.Get("RoleSessionName"); got != "keymount-ns1.app-a" {
		t.Errorf("RoleSessionName = %q, want keymount-ns1.app-a", got)
	}
	if creds.AccessKeyID == ownCreds.AccessKeyID {
		t.Error("the assumed role's credentials are the pod's own")
	}
	// What a store call signed with them is, as moto sees it.
	client := sts.New(sts.Options{Region: "eu-west-1", BaseEndpoint: aws.String(endpoint), Credentials: id.Credentials})
	who, err := client.GetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "assumed-role/secrets-reader/keymount-ns1.app-a"; !strings.HasSuffix(aws.ToString(who.Arn), want) {
		t.Errorf("caller = %s, want .../%s", aws.ToString(who.Arn), want)
	}
	if !strings.HasSuffix(id.Key, assumeKeySep+targetRole) || !strings.HasPrefix(id.Key, own.Key) {
		t.Errorf("key = %q, want the pod identity's %q and the role", id.Key, own.Key)
	}
}

// testAssumeOncePerPair: one AssumeRole per identity and role across many mounts.
func testAssumeOncePerPair(t *testing.T, newResolver resolverFactory) {
	r, rec := newResolver(t, Config{})
	const mounts = 50
	var wg sync.WaitGroup
	errs := make([]error, mounts)
	for i := range mounts {
		wg.Go(func() {
			_, errs[i] = r.For(t.Context(), assumeSpec("ns1", "app-a", fmt.Sprintf("web-%d", i), targetRole))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := len(rec.requests("AssumeRole")); got != 1 {
		t.Errorf("AssumeRole requests for %d mounts of one identity and role = %d, want 1", mounts, got)
	}
	// Another service account trusted by the same role, and another
	// role for the same service account: one more each.
	for _, s := range []*spec.Spec{assumeSpec("ns2", "app-a", "web", targetRole), assumeSpec("ns1", "app-a", "web", roleB)} {
		for range 3 {
			if _, err := r.For(t.Context(), s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := len(rec.requests("AssumeRole")); got != 3 {
		t.Errorf("AssumeRole requests for 3 (identity, role) pairs = %d, want 3", got)
	}
}

// testAssumeRenewal: renews shortly before expiry.
func testAssumeRenewal(t *testing.T, newResolver resolverFactory) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	r, rec := newResolver(t, Config{Clock: clk, Refresh: 5 * time.Minute})
	s := assumeSpec("ns1", "app-a", "web-0", targetRole)
	id, err := r.For(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := id.Credentials.Retrieve(t.Context())
	if got := rec.requests("AssumeRole")[0].form.Get("DurationSeconds"); got != "3600" {
		t.Errorf("DurationSeconds = %s, want 3600", got)
	}
	for _, tc := range []struct {
		at    time.Time
		calls int
	}{
		{at: first.Expires.Add(-30 * time.Minute), calls: 1},
		{at: first.Expires.Add(-5*time.Minute - time.Second), calls: 1},
		{at: first.Expires.Add(-4 * time.Minute), calls: 2},
	} {
		clk.SetTime(tc.at)
		id, err := r.For(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(rec.requests("AssumeRole")); got != tc.calls {
			t.Errorf("at expiry%v: AssumeRole requests = %d, want %d", tc.at.Sub(first.Expires), got, tc.calls)
		}
		creds, _ := id.Credentials.Retrieve(t.Context())
		if renewed := creds.AccessKeyID != first.AccessKeyID; renewed != (tc.calls == 2) {
			t.Errorf("at expiry%v: renewed = %t", tc.at.Sub(first.Expires), renewed)
		}
	}
}

// testAssumeRefused: a role whose trust policy refuses the pod.
func testAssumeRefused(t *testing.T, newResolver resolverFactory) {
	r, rec := newResolver(t, Config{})
	_, err := r.For(t.Context(), assumeSpec("ns1", "app-a", "web-0", deniedRole))
	if got := server.Code(err); got != codes.PermissionDenied {
		t.Fatalf("code = %v, want PermissionDenied (err %v)", got, err)
	}
	for _, want := range []string{spec.KeyAssumeRoleARN, deniedRole, "ns1/app-a"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// Not cached: the next mount asks again.
	_, _ = r.For(t.Context(), assumeSpec("ns1", "app-a", "web-0", deniedRole))
	if got := len(rec.requests("AssumeRole")); got != 2 {
		t.Errorf("AssumeRole requests = %d, want 2 (a refusal is not cached)", got)
	}
}

// testAssumeForget: forget drops the assumed role's credentials only.
func testAssumeForget(t *testing.T, newResolver resolverFactory) {
	r, rec := newResolver(t, Config{})
	s := assumeSpec("ns1", "app-a", "web-0", targetRole)
	id, err := r.For(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	r.Forget(id.Key)
	if _, err := r.For(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if a, w := len(rec.requests("AssumeRole")), len(rec.requests("AssumeRoleWithWebIdentity")); a != 2 || w != 1 {
		t.Errorf("AssumeRole = %d (want 2), AssumeRoleWithWebIdentity = %d (want 1)", a, w)
	}
}

func TestAssumeSessionName(t *testing.T) {
	for _, tc := range []struct{ ns, sa, want string }{
		{"shop", "app", "keymount-shop.app"},
		{"a", "b:c", "keymount-a.b-c"},
		{strings.Repeat("n", 63), "sa", "keymount-" + strings.Repeat("n", 55)},
	} {
		s := &spec.Spec{Namespace: tc.ns, ServiceAccount: tc.sa}
		if got := assumeSessionName(s); got != tc.want {
			t.Errorf("assumeSessionName(%s/%s) = %q, want %q", tc.ns, tc.sa, got, tc.want)
		}
	}
}
