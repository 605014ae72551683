package store_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/keymount/keymount/provider/aws/store"
)

// sdkEnv isolates config.LoadDefaultConfig from the machine: no shared
// files, no instance metadata, no endpoint or region of its own.
func sdkEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SECRETS_MANAGER", "AWS_ENDPOINT_URL_SSM",
		"AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT", "AWS_CA_BUNDLE", "AWS_PROFILE", "AWS_MAX_ATTEMPTS"} {
		t.Setenv(k, "")
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_REGION", "eu-north-1")
}

func loadSDKConfig(t *testing.T) aws.Config {
	t.Helper()
	cfg, err := awsconfig.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatalf("LoadDefaultConfig: %v", err)
	}
	return cfg
}

// TestSDKEnvironmentEndpoints: AWS_ENDPOINT_URL_SECRETS_MANAGER and
// AWS_ENDPOINT_URL_SSM reach the clients through the base configuration.
func TestSDKEnvironmentEndpoints(t *testing.T) {
	sdkEnv(t)
	sm, ps := newFakeAWS(t), newFakeAWS(t)
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", sm.url)
	t.Setenv("AWS_ENDPOINT_URL_SSM", ps.url)
	s := store.New(store.Config{AWS: loadSDKConfig(t)})
	res, err := s.Fetch(t.Context(), &store.Request{Identity: "a", Credentials: fakeCreds(), Region: "us-east-1", Objects: objects(2, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if got := contents(res); got["s1"] != "s1@1" || got["p1"] != "p1@1" {
		t.Errorf("files %v", got)
	}
	if sm.byTarget()["secretsmanager.BatchGetSecretValue@us-east-1"] != 1 || ps.byTarget()["AmazonSSM.GetParameters@us-east-1"] != 1 {
		t.Errorf("calls: secrets manager %v, ssm %v", sm.byTarget(), ps.byTarget())
	}
}

// hostRecorder fails every request and records its host.
type hostRecorder struct {
	mu    sync.Mutex
	hosts []string
}

var errNoNetwork = errors.New("no network in this test")

func (h *hostRecorder) Do(req *http.Request) (*http.Response, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !slices.Contains(h.hosts, req.URL.Host) {
		h.hosts = append(h.hosts, req.URL.Host)
	}
	return nil, errNoNetwork
}

// sdkHosts are the hosts the SDK's own endpoint rules give Secrets Manager
// and SSM in region.
func sdkHosts(t *testing.T, region string, fips, dualStack bool) []string {
	t.Helper()
	sm, err := secretsmanager.NewDefaultEndpointResolverV2().ResolveEndpoint(t.Context(), secretsmanager.EndpointParameters{
		Region: aws.String(region), UseFIPS: aws.Bool(fips), UseDualStack: aws.Bool(dualStack)})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := ssm.NewDefaultEndpointResolverV2().ResolveEndpoint(t.Context(), ssm.EndpointParameters{
		Region: aws.String(region), UseFIPS: aws.Bool(fips), UseDualStack: aws.Bool(dualStack)})
	if err != nil {
		t.Fatal(err)
	}
	hosts := []string{sm.URI.Host, ps.URI.Host}
	slices.Sort(hosts)
	return hosts
}

// TestSDKEnvironmentFIPSAndDualStack: AWS_USE_FIPS_ENDPOINT and
// AWS_USE_DUALSTACK_ENDPOINT choose the endpoints, as the SDK's rules
// resolve them (Secrets Manager's standard endpoints are already
// dual-stack, SSM's are not).
func TestSDKEnvironmentFIPSAndDualStack(t *testing.T) {
	plain := sdkHosts(t, "us-east-2", false, false)
	tests := []struct {
		env  string
		want []string
	}{
		{"", plain},
		{"AWS_USE_FIPS_ENDPOINT", sdkHosts(t, "us-east-2", true, false)},
		{"AWS_USE_DUALSTACK_ENDPOINT", sdkHosts(t, "us-east-2", false, true)},
	}
	for _, tc := range tests {
		t.Run("env "+tc.env, func(t *testing.T) {
			sdkEnv(t)
			if tc.env != "" {
				t.Setenv(tc.env, "true")
				if slices.Equal(tc.want, plain) {
					t.Fatalf("%s gives the default hosts %v: the test would prove nothing", tc.env, plain)
				}
			}
			rec := &hostRecorder{}
			s := store.New(store.Config{AWS: loadSDKConfig(t), HTTPClient: rec, MaxAttempts: 1})
			_, err := s.Fetch(t.Context(), &store.Request{Identity: "a", Credentials: fakeCreds(), Region: "us-east-2", Objects: objects(1, 1)})
			if err == nil {
				t.Fatal("Fetch succeeded without a network")
			}
			slices.Sort(rec.hosts)
			if !slices.Equal(rec.hosts, tc.want) {
				t.Errorf("hosts %v, want %v", rec.hosts, tc.want)
			}
		})
	}
}

// TestSDKEnvironmentCABundle: AWS_CA_BUNDLE lets the store trust an
// endpoint's private CA; without it the same endpoint is refused.
func TestSDKEnvironmentCABundle(t *testing.T) {
	sdkEnv(t)
	f := &fakeAWS{version: map[string]string{}, missing: map[string]bool{}, known: map[string]bool{}}
	srv := httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	req := func(s *store.Store) error {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		_, err := s.Fetch(ctx, &store.Request{Identity: "a", Credentials: fakeCreds(), Region: "us-east-1", Objects: objects(1, 0)})
		return err
	}
	if err := req(store.New(store.Config{AWS: loadSDKConfig(t), Endpoint: srv.URL, MaxAttempts: 1})); err == nil {
		t.Fatal("an endpoint with an unknown CA was trusted without AWS_CA_BUNDLE")
	}

	bundle := filepath.Join(t.TempDir(), "ca.pem")
	pemData := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(bundle, pemData, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CA_BUNDLE", bundle)
	if err := req(store.New(store.Config{AWS: loadSDKConfig(t), Endpoint: srv.URL, MaxAttempts: 1})); err != nil {
		t.Fatalf("with AWS_CA_BUNDLE: %v", err)
	}
}

// TestEndpointFlagWins: Config.Endpoint (--aws-endpoint) is used over the
// environment's endpoints.
func TestEndpointFlagWins(t *testing.T) {
	sdkEnv(t)
	f := newFakeAWS(t)
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", "http://127.0.0.1:1")
	s := store.New(store.Config{AWS: loadSDKConfig(t), Endpoint: f.url, MaxAttempts: 1})
	if _, err := s.Fetch(t.Context(), &store.Request{Identity: "a", Credentials: fakeCreds(), Region: "us-east-1", Objects: objects(1, 1)}); err != nil {
		t.Fatal(err)
	}
}
