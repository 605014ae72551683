package identity

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"k8s.io/utils/clock"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/server"
)

// Token audiences the CSIDriver's tokenRequests must include.
const (
	AudienceSTS         = "sts.amazonaws.com"
	AudiencePodIdentity = "pods.eks.amazonaws.com"
)

// Defaults of Config.
const (
	DefaultPodIdentityEndpointIPv4 = "http://169.254.170.23/v1/credentials"
	DefaultPodIdentityEndpointIPv6 = "http://[fd00:ec2::23]/v1/credentials"
	DefaultRefresh                 = 5 * time.Minute
	// defaultHTTPTimeout bounds one agent request when Config.HTTPClient
	// is nil.
	defaultHTTPTimeout = 30 * time.Second
	// globalSTSRegion signs requests to STS when the class names no region.
	globalSTSRegion = "us-east-1"
)

// Sentinel errors, wrapped with %w. Each also matches the provider kit's
// sentinel of its gRPC code.
var (
	// ErrInvalidSpec: the volume context lacks the pod's namespace or
	// service account (the CSIDriver's podInfoOnMount). FailedPrecondition.
	ErrInvalidSpec error = &sentinel{"invalid identity", server.ErrFailedPrecondition}
	// ErrMissingToken: the driver was not given the token for an audience
	// (the CSIDriver's tokenRequests). FailedPrecondition.
	ErrMissingToken error = &sentinel{"missing service account token", server.ErrFailedPrecondition}
	// ErrMissingRoleARN: the service account has no role annotation.
	// FailedPrecondition.
	ErrMissingRoleARN error = &sentinel{"service account has no IAM role annotation", server.ErrFailedPrecondition}
	// ErrAgent: the Pod Identity agent refused or failed the request. An
	// *AgentError that refuses (4xx) is PermissionDenied; any other agent
	// failure is Unavailable.
	ErrAgent error = &sentinel{"eks pod identity agent error", server.ErrUnavailable}
)

// Config configures a Resolver. The zero value talks to AWS.
type Config struct {
	// AWS is the base SDK configuration of the STS clients, as
	// config.LoadDefaultConfig reads it from the standard AWS environment
	// (AWS_USE_FIPS_ENDPOINT, AWS_USE_DUALSTACK_ENDPOINT, AWS_ENDPOINT_URL
	// and AWS_ENDPOINT_URL_STS, AWS_CA_BUNDLE, ...). Its region is replaced
	// by the mount's and its credentials are never used. The zero value is
	// the SDK's defaults.
	AWS aws.Config
	// STSEndpoint, when set, is the BaseEndpoint of STS over anything in
	// AWS (testing).
	STSEndpoint string
	// PodIdentityEndpointIPv4 is the agent's IPv4 URL
	// (default DefaultPodIdentityEndpointIPv4).
	PodIdentityEndpointIPv4 string
	// PodIdentityEndpointIPv6 is the agent's IPv6 URL
	// (default DefaultPodIdentityEndpointIPv6).
	PodIdentityEndpointIPv6 string
	// HTTPClient, when set, sends STS requests instead of AWS.HTTPClient,
	// and agent requests; nil means agent requests go through a client
	// with a 30-second timeout.
	HTTPClient *http.Client
	// PodIdentityTimeout bounds one request to one EKS Pod Identity agent
	// endpoint (default DefaultPodIdentityTimeout), so that an unreachable
	// IPv4 agent leaves time to try IPv6.
	PodIdentityTimeout time.Duration
	// Refresh is how long before expiry cached credentials are renewed
	// (default DefaultRefresh).
	Refresh time.Duration
	// Clock decides when cached credentials are stale (default real time).
	Clock clock.PassiveClock
	// Outages, when set, remembers regions that failed while their
	// failover region served (shared with the store): an exchange for a
	// class with a failover region goes to the failover region's STS first
	// while the mount's region is down, and a mount's region whose STS
	// cannot be reached while the failover region's answers is reported.
	Outages RegionOutages
	// Observer, when set, hears every credential request (metrics).
	Observer Observer
}

// Credential sources, the Observer's source.
const (
	SourceSTS         = "sts"
	SourcePodIdentity = "pod_identity"
)

// Observer hears the resolver's credential requests, for metrics. Its
// methods must be cheap and safe for concurrent use.
type Observer interface {
	// CredentialRequest is one request for credentials: source is
	// SourceSTS (one AssumeRoleWithWebIdentity, retries included, at one
	// region's STS) or SourcePodIdentity (the node's EKS Pod Identity
	// agent, each endpoint tried); failed says it gave none. Cached
	// credentials are served without one.
	CredentialRequest(source string, failed bool, took time.Duration)
}

// observe tells the Observer of one request started at start.
func (r *Resolver) observe(source string, err error, start time.Time) {
	if r.cfg.Observer != nil {
		r.cfg.Observer.CredentialRequest(source, err != nil, time.Since(start))
	}
}

// RegionOutages remembers regions that failed recently. *store.Store
// implements it.
type RegionOutages interface {
	// RegionDown reports whether region failed recently.
	RegionDown(region string) bool
	// MarkRegionDown remembers that region failed while its failover
	// region served.
	MarkRegionDown(region string)
}

func (c Config) withDefaults() Config {
	if c.PodIdentityEndpointIPv4 == "" {
		c.PodIdentityEndpointIPv4 = DefaultPodIdentityEndpointIPv4
	}
	if c.PodIdentityEndpointIPv6 == "" {
		c.PodIdentityEndpointIPv6 = DefaultPodIdentityEndpointIPv6
	}
	if c.Refresh <= 0 {
		c.Refresh = DefaultRefresh
	}
	if c.PodIdentityTimeout <= 0 {
		c.PodIdentityTimeout = DefaultPodIdentityTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

// Resolver resolves a mount's identity to AWS credentials. It is safe for
// concurrent use; create one per process.
type Resolver struct {
	cfg   Config
	sas   ServiceAccountReader
	cache *cache
	// agentHTTP sends the requests to the Pod Identity agent.
	agentHTTP *http.Client

	// stsClients holds the STS client of each region (regions are
	// validated names, so few).
	stsMu      sync.Mutex
	stsClients map[string]*sts.Client
}

// New returns a Resolver that reads role annotations through sas.
func New(cfg Config, sas ServiceAccountReader) *Resolver {
	cfg = cfg.withDefaults()
	agentHTTP := cfg.HTTPClient
	if agentHTTP == nil {
		agentHTTP = &http.Client{Timeout: defaultHTTPTimeout}
	}
	return &Resolver{cfg: cfg, sas: sas, cache: newCache(cfg.Clock, cfg.Refresh), agentHTTP: agentHTTP,
		stsClients: map[string]*sts.Client{}}
}

// Identity is a resolved identity and its credentials.
type Identity struct {
	// Key names the identity: "irsa:<namespace>/<serviceAccount>:<roleARN>"
	// (shared by the pods of a service account) or
	// "podidentity:<namespace>/<serviceAccount>/<pod>/<pod UID>" (one pod's),
	// followed by " assume:<roleARN>" for a class's assumeRoleArn.
	Key string
	// Credentials serves the identity's cached credentials.
	Credentials aws.CredentialsProvider
	// FailoverCredentials, when not nil, serves the credentials for the
	// class's failover region, from that region's STS, fetched on first
	// use. nil means Credentials serve every region (EKS Pod Identity:
	// the node's agent is not regional).
	FailoverCredentials aws.CredentialsProvider
}

// String names the identity without its credentials.
func (i Identity) String() string {
	return fmt.Sprintf("identity{key: %s, credentials: %v}", i.Key, i.Credentials)
}

// GoString keeps %#v from printing the credentials.
func (i Identity) GoString() string { return i.String() }

// For returns the credentials of the pod described by s: IRSA, or EKS Pod
// Identity when s.UsePodIdentity is set; with s.AssumeRoleARN, those of
// that role, assumed with the pod's.
func (r *Resolver) For(ctx context.Context, s *spec.Spec) (*Identity, error) {
	if s == nil || s.Namespace == "" || s.ServiceAccount == "" {
		return nil, fmt.Errorf("%w: the volume context lacks the pod's namespace or service account "+
			"(is podInfoOnMount set on the CSIDriver?)", ErrInvalidSpec)
	}
	base, err := r.podIdentityOrIRSA(ctx, s)
	if err != nil || s.AssumeRoleARN == "" {
		return base, err
	}
	return r.assume(ctx, s, base)
}

// podIdentityOrIRSA returns the pod's own credentials.
func (r *Resolver) podIdentityOrIRSA(ctx context.Context, s *spec.Spec) (*Identity, error) {
	if s.UsePodIdentity {
		return r.podIdentity(ctx, s)
	}
	return r.irsa(ctx, s)
}

// Forget drops the cached credentials of the identity key (Identity.Key),
// from every region's STS,
// after AWS refused them (expired, unknown, or denied): the next mount of
// that identity gets new ones instead of failing with the same credentials
// until they expire.
func (r *Resolver) Forget(key string) {
	r.cache.dropIdentity(key)
}

// token returns the token for audience, or an error saying how to get one.
func token(s *spec.Spec, audience string) (string, error) {
	if t := s.Tokens[audience]; t != "" {
		return t, nil
	}
	return "", fmt.Errorf("%w for audience %q of service account %s/%s: add {audience: %s} to the "+
		"CSIDriver's spec.tokenRequests", ErrMissingToken, audience, s.Namespace, s.ServiceAccount, audience)
}
