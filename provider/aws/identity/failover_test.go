package identity

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/provider/server"
)

// regionalSTS answers AssumeRoleWithWebIdentity for every regional STS
// host, with an access key naming the region that issued it; hosts in down
// cannot be reached.
type regionalSTS struct {
	mu    sync.Mutex
	down  map[string]bool // region -> unreachable
	calls map[string]int  // region -> requests
}

var stsHostRE = regexp.MustCompile(`^sts\.([a-z0-9-]+)\.amazonaws\.com$`)

func (s *regionalSTS) RoundTrip(req *http.Request) (*http.Response, error) {
	m := stsHostRE.FindStringSubmatch(req.URL.Host)
	if m == nil {
		return nil, fmt.Errorf("unexpected host %s", req.URL.Host)
	}
	region := m[1]
	s.mu.Lock()
	s.calls[region]++
	down := s.down[region]
	s.mu.Unlock()
	if down {
		return nil, errors.New("connection refused")
	}
	body := fmt.Sprintf(`<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>AKID-%s</AccessKeyId><SecretAccessKey>secret</SecretAccessKey>
<SessionToken>session</SessionToken><Expiration>%s</Expiration></Credentials>
<AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/app-a/p</Arn><AssumedRoleId>AROA:p</AssumedRoleId></AssumedRoleUser>
</AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>r1</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`,
		region, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/xml"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
}

func (s *regionalSTS) count(region string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[region]
}

// TestIRSAFailoverRegionSTS: the failover region's credentials come from
// that region's STS, only once the failover region is used, and are
// cached; when the mount's region's STS is unreachable, the failover
// region's STS serves the mount; Forget drops both.
func TestIRSAFailoverRegionSTS(t *testing.T) {
	newResolver := func(down ...string) (*Resolver, *regionalSTS) {
		sts := &regionalSTS{down: map[string]bool{}, calls: map[string]int{}}
		for _, r := range down {
			sts.down[r] = true
		}
		return New(Config{HTTPClient: &http.Client{Transport: sts}}, &fakeServiceAccounts{roles: map[string]string{"ns/sa": roleA}}), sts
	}
	spec := irsaSpec("ns", "sa", "p")
	spec.Region, spec.FailoverRegion = "us-east-1", "us-west-2"

	t.Run("failover credentials from the failover region's STS, on first use", func(t *testing.T) {
		r, sts := newResolver()
		id, err := r.For(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		if creds, _ := id.Credentials.Retrieve(t.Context()); creds.AccessKeyID != "AKID-us-east-1" {
			t.Errorf("primary credentials from %s, want the STS of us-east-1", creds.AccessKeyID)
		}
		if id.FailoverCredentials == nil || sts.count("us-west-2") != 0 {
			t.Fatalf("failover credentials %v, %d calls to the failover STS before use", id.FailoverCredentials, sts.count("us-west-2"))
		}
		for range 3 {
			creds, err := id.FailoverCredentials.Retrieve(t.Context())
			if err != nil || creds.AccessKeyID != "AKID-us-west-2" {
				t.Fatalf("failover credentials %s, %v; want the STS of us-west-2", creds.AccessKeyID, err)
			}
		}
		if sts.count("us-west-2") != 1 {
			t.Errorf("%d calls to the failover STS, want 1 (cached)", sts.count("us-west-2"))
		}
		r.Forget(id.Key)
		if _, err := r.For(t.Context(), spec); err != nil {
			t.Fatal(err)
		}
		if _, err := id.FailoverCredentials.Retrieve(t.Context()); err != nil {
			t.Fatal(err)
		}
		if sts.count("us-east-1") != 2 || sts.count("us-west-2") != 2 {
			t.Errorf("after Forget: %d and %d calls, want both regions asked again", sts.count("us-east-1"), sts.count("us-west-2"))
		}
	})

	t.Run("the mount's region's STS unreachable", func(t *testing.T) {
		r, _ := newResolver("us-east-1")
		id, err := r.For(t.Context(), spec)
		if err != nil {
			t.Fatalf("with a failover region: %v", err)
		}
		if creds, _ := id.Credentials.Retrieve(t.Context()); creds.AccessKeyID != "AKID-us-west-2" {
			t.Errorf("credentials %s, want the failover region's STS's", creds.AccessKeyID)
		}
		alone := irsaSpec("ns", "sa", "p")
		alone.Region = "us-east-1"
		_, err = r.For(t.Context(), alone)
		if server.Code(err) != codes.Unavailable {
			t.Errorf("without a failover region: %v, want Unavailable", err)
		}
	})
}
