package identity

import (
	"errors"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/keymount/keymount/tests/motoserver"
)

// sdkConfig loads the SDK configuration as main does, isolated from the
// machine's files and endpoints; env is set first.
func sdkConfig(t *testing.T, env map[string]string) aws.Config {
	t.Helper()
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS", "AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT", "AWS_PROFILE"} {
		t.Setenv(k, "")
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for k, v := range env {
		t.Setenv(k, v)
	}
	cfg, err := awsconfig.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestSTSFromEnvironment: AWS_ENDPOINT_URL_STS reaches the STS client
// through the base configuration (here, moto's STS).
func TestSTSFromEnvironment(t *testing.T) {
	endpoint := motoserver.Start(t)
	cfg := sdkConfig(t, map[string]string{"AWS_ENDPOINT_URL_STS": endpoint})
	r := New(Config{AWS: cfg}, &fakeServiceAccounts{roles: map[string]string{"ns/sa": roleA}})
	id, err := r.For(t.Context(), irsaSpec("ns", "sa", "p"))
	if err != nil {
		t.Fatal(err)
	}
	if creds, err := id.Credentials.Retrieve(t.Context()); err != nil || creds.AccessKeyID == "" {
		t.Errorf("credentials from moto's STS: %v", err)
	}
}

type stsHosts struct {
	mu    sync.Mutex
	hosts []string
}

func (h *stsHosts) RoundTrip(req *http.Request) (*http.Response, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hosts = append(h.hosts, req.URL.Host)
	return nil, errors.New("no network in this test")
}

// TestSTSFIPS: AWS_USE_FIPS_ENDPOINT sends the exchange to the region's
// FIPS STS endpoint, as the SDK's rules name it.
func TestSTSFIPS(t *testing.T) {
	cfg := sdkConfig(t, map[string]string{"AWS_USE_FIPS_ENDPOINT": "true"})
	want, err := sts.NewDefaultEndpointResolverV2().ResolveEndpoint(t.Context(), sts.EndpointParameters{
		Region: aws.String("us-west-2"), UseFIPS: aws.Bool(true), UseDualStack: aws.Bool(false), UseGlobalEndpoint: aws.Bool(false)})
	if err != nil {
		t.Fatal(err)
	}
	rec := &stsHosts{}
	r := New(Config{AWS: cfg, HTTPClient: &http.Client{Transport: rec}}, &fakeServiceAccounts{roles: map[string]string{"ns/sa": roleA}})
	s := irsaSpec("ns", "sa", "p")
	s.Region = "us-west-2"
	if _, err := r.For(t.Context(), s); err == nil {
		t.Fatal("For succeeded without a network")
	}
	if len(rec.hosts) == 0 || rec.hosts[0] != want.URI.Host || want.URI.Host != "sts-fips.us-west-2.amazonaws.com" {
		t.Errorf("STS hosts %v, want %s", rec.hosts, want.URI.Host)
	}
}
