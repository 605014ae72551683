package identity

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/tests/motoserver"
)

const (
	roleA = "arn:aws:iam::123456789012:role/app-a"
	roleB = "arn:aws:iam::123456789012:role/app-b"
	// webToken is a fake projected token: moto accepts any.
	webToken = "eyJhbGciOiJSUzI1NiJ9.fake-web-identity-token.sig"
)

func irsaSpec(ns, sa, pod string) *spec.Spec {
	return &spec.Spec{
		Namespace:      ns,
		ServiceAccount: sa,
		PodName:        pod,
		Region:         "eu-west-1",
		Tokens:         map[string]string{AudienceSTS: webToken},
	}
}

// TestIRSA exchanges tokens with moto_server's STS.
func TestIRSA(t *testing.T) {
	endpoint := motoserver.Start(t)
	sas := &fakeServiceAccounts{roles: map[string]string{
		"ns1/app-a": roleA,
		"ns1/app-b": roleB,
		"ns2/app-a": roleA, // same role, other service account
	}}

	t.Run("concurrent mounts share one exchange", func(t *testing.T) { testIRSAConcurrent(t, endpoint, sas) })
	t.Run("renews shortly before expiry", func(t *testing.T) { testIRSARenewal(t, endpoint, sas) })
	t.Run("distinct identities exchange separately", func(t *testing.T) { testIRSADistinct(t, endpoint, sas) })
	t.Run("global endpoint when no region", func(t *testing.T) {
		client, _ := countingClient()
		r := New(Config{STSEndpoint: endpoint, HTTPClient: client}, sas)
		s := irsaSpec("ns1", "app-b", "p")
		s.Region = ""
		if _, err := r.For(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	})
}

func testIRSAConcurrent(t *testing.T, endpoint string, sas ServiceAccountReader) {
	client, sts := countingClient()
	r := New(Config{STSEndpoint: endpoint, HTTPClient: client}, sas)
	const mounts = 100
	ids := make([]*Identity, mounts)
	errs := make([]error, mounts)
	var wg sync.WaitGroup
	for i := range mounts {
		wg.Go(func() {
			ids[i], errs[i] = r.For(t.Context(), irsaSpec("ns1", "app-a", fmt.Sprintf("pod-%d", i)))
		})
	}
	wg.Wait()
	if got := sts.calls.Load(); got != 1 {
		t.Errorf("STS requests = %d, want 1", got)
	}
	var first aws.Credentials
	for i := range mounts {
		if errs[i] != nil {
			t.Fatalf("For #%d: %v", i, errs[i])
		}
		creds, err := ids[i].Credentials.Retrieve(t.Context())
		if err != nil {
			t.Fatalf("Retrieve #%d: %v", i, err)
		}
		if i == 0 {
			first = creds
		}
		if creds != first {
			t.Errorf("mount %d got other credentials than mount 0", i)
		}
	}
	if first.AccessKeyID == "" || first.SecretAccessKey == "" || first.SessionToken == "" || !first.CanExpire {
		t.Errorf("incomplete credentials: %v", ids[0])
	}
	if first.AccountID != "123456789012" {
		t.Errorf("AccountID = %q, want 123456789012", first.AccountID)
	}
	if want := "irsa:ns1/app-a:" + roleA; ids[0].Key != want {
		t.Errorf("Key = %q, want %q", ids[0].Key, want)
	}
	if form := sts.lastForm(); form.Get("Action") != "AssumeRoleWithWebIdentity" ||
		form.Get("RoleArn") != roleA || !strings.HasPrefix(form.Get("RoleSessionName"), "pod-") {
		t.Errorf("unexpected STS request: Action=%q RoleArn=%q RoleSessionName=%q",
			form.Get("Action"), form.Get("RoleArn"), form.Get("RoleSessionName"))
	}
}

func testIRSARenewal(t *testing.T, endpoint string, sas ServiceAccountReader) {
	client, sts := countingClient()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	r := New(Config{STSEndpoint: endpoint, HTTPClient: client, Clock: clk, Refresh: 5 * time.Minute}, sas)
	s := irsaSpec("ns1", "app-a", "web-0")
	id, err := r.For(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := id.Credentials.Retrieve(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at    time.Time
		calls int64
	}{
		{at: creds.Expires.Add(-30 * time.Minute), calls: 1},
		{at: creds.Expires.Add(-5*time.Minute - time.Second), calls: 1},
		{at: creds.Expires.Add(-4 * time.Minute), calls: 2},
	} {
		clk.SetTime(tc.at)
		if _, err := r.For(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		if got := sts.calls.Load(); got != tc.calls {
			t.Errorf("at expiry%v: STS requests = %d, want %d", tc.at.Sub(creds.Expires), got, tc.calls)
		}
	}
}

func testIRSADistinct(t *testing.T, endpoint string, sas ServiceAccountReader) {
	client, sts := countingClient()
	obs := &requestCounter{}
	r := New(Config{STSEndpoint: endpoint, HTTPClient: client, Observer: obs}, sas)
	keys := map[string]bool{}
	for range 2 {
		for _, s := range []*spec.Spec{
			irsaSpec("ns1", "app-a", "a"),
			irsaSpec("ns1", "app-b", "b"),
			irsaSpec("ns2", "app-a", "c"),
		} {
			id, err := r.For(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			keys[id.Key] = true
		}
	}
	if got := sts.calls.Load(); got != 3 {
		t.Errorf("STS requests = %d, want 3", got)
	}
	if got := obs.get(SourceSTS, false); got != 3 || obs.total() != 3 {
		t.Errorf("the Observer heard %d successful STS requests of %d, want 3 of 3", got, obs.total())
	}
	if len(keys) != 3 {
		t.Errorf("distinct keys = %v, want 3", keys)
	}
}

func TestIRSAErrors(t *testing.T) {
	sas := &fakeServiceAccounts{roles: map[string]string{"ns/sa": roleA}}
	obs := &requestCounter{}
	r := New(Config{STSEndpoint: "http://127.0.0.1:1", Observer: obs}, sas)

	t.Run("missing token", func(t *testing.T) {
		s := irsaSpec("ns", "sa", "p")
		s.Tokens = map[string]string{AudiencePodIdentity: webToken}
		_, err := r.For(t.Context(), s)
		if !errors.Is(err, ErrMissingToken) {
			t.Fatalf("err = %v, want ErrMissingToken", err)
		}
		for _, want := range []string{AudienceSTS, "tokenRequests", "ns/sa"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
	})

	t.Run("no role", func(t *testing.T) {
		_, err := r.For(t.Context(), irsaSpec("ns", "other", "p"))
		if !errors.Is(err, ErrMissingRoleARN) {
			t.Fatalf("err = %v, want ErrMissingRoleARN", err)
		}
	})

	t.Run("no service account", func(t *testing.T) {
		_, err := r.For(t.Context(), &spec.Spec{Namespace: "ns", Tokens: map[string]string{AudienceSTS: webToken}})
		if !errors.Is(err, ErrInvalidSpec) {
			t.Fatalf("err = %v, want ErrInvalidSpec", err)
		}
	})

	t.Run("unreachable STS", func(t *testing.T) {
		_, err := r.For(t.Context(), irsaSpec("ns", "sa", "p"))
		if err == nil || !strings.Contains(err.Error(), roleA) {
			t.Fatalf("err = %v, want an error naming the role", err)
		}
		if strings.Contains(err.Error(), webToken) {
			t.Errorf("error leaks the token: %v", err)
		}
		// Only the exchange was a request; the refused specs sent none.
		if n := obs.get(SourceSTS, true); n != 1 || obs.total() != 1 {
			t.Errorf("the Observer heard %d failed STS requests of %d, want 1 of 1", n, obs.total())
		}
	})
}

// TestIRSARejectedTokenRedacted uses a fake STS: the real one cannot be made
// to quote the token back.
func TestIRSARejectedTokenRedacted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if err := req.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code>`+
			`<Message>token %s is not valid</Message></Error><RequestId>r1</RequestId></ErrorResponse>`,
			req.PostForm.Get("WebIdentityToken"))
	}))
	t.Cleanup(srv.Close)
	r := New(Config{STSEndpoint: srv.URL}, &fakeServiceAccounts{roles: map[string]string{"ns/sa": roleA}})
	_, err := r.For(t.Context(), irsaSpec("ns", "sa", "p"))
	if err == nil {
		t.Fatal("For succeeded against a rejecting STS")
	}
	if strings.Contains(err.Error(), webToken) {
		t.Errorf("error leaks the token: %v", err)
	}
	if !strings.Contains(err.Error(), "<redacted>") {
		t.Errorf("error %q lost the STS message", err)
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidIdentityToken" {
		t.Errorf("errors.As(APIError) = %v, want code InvalidIdentityToken", apiErr)
	}
}

func TestSessionName(t *testing.T) {
	for _, tc := range []struct{ pod, want string }{
		{"web-7d9c-x2x", "web-7d9c-x2x"},
		{"a.b@c=d,e+f_g", "a.b@c=d,e+f_g"},
		{"p/q r:s", "p-q-r-s"},
		{strings.Repeat("x", 70), strings.Repeat("x", 64)},
		{"", "keymount"},
		{"x", "keymount"},
	} {
		if got := sessionName(tc.pod); got != tc.want {
			t.Errorf("sessionName(%q) = %q, want %q", tc.pod, got, tc.want)
		}
	}
}

var validSessionName = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)

func FuzzSessionName(f *testing.F) {
	for _, s := range []string{"", "web-0", "ünïcode-pod", strings.Repeat("é", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pod string) {
		if got := sessionName(pod); !validSessionName.MatchString(got) {
			t.Errorf("sessionName(%q) = %q: STS would refuse it", pod, got)
		}
	})
}

// requestCounter is an Observer counting requests by source and failure.
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *requestCounter) CredentialRequest(source string, failed bool, _ time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[fmt.Sprint(source, failed)]++
}

func (c *requestCounter) get(source string, failed bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[fmt.Sprint(source, failed)]
}

func (c *requestCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.n {
		n += v
	}
	return n
}
