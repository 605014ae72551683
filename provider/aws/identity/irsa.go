package identity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/aws-sdk-go-v2/service/sts/types"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/server"
)

const (
	// irsaSource is the Source of IRSA credentials.
	irsaSource = "keymount-irsa"
	// maxSessionName is STS's limit on RoleSessionName.
	maxSessionName = 64
	// defaultSessionName is used when the pod name leaves too little.
	defaultSessionName = "keymount"
)

// invalidSessionChars matches what STS refuses in a RoleSessionName.
var invalidSessionChars = regexp.MustCompile(`[^\w+=,.@-]`)

// irsa exchanges the pod's sts.amazonaws.com token for the role its service
// account is annotated with, at the STS of the mount's region. With a
// failover region, the failover region's calls are signed with credentials
// from that region's STS, asked for when first used; and when the mount's
// region's STS cannot be reached, the failover region's STS serves the
// mount's region too (STS credentials are valid in every region).
func (r *Resolver) irsa(ctx context.Context, s *spec.Spec) (*Identity, error) {
	tok, err := token(s, AudienceSTS)
	if err != nil {
		return nil, err
	}
	roleARN, err := r.sas.RoleARN(ctx, s.Namespace, s.ServiceAccount)
	if err != nil {
		return nil, err
	}
	// The key includes the service account: a role whose trust policy admits
	// one service account must not be served from cache to another.
	key := "irsa:" + s.Namespace + "/" + s.ServiceAccount + ":" + roleARN
	session := sessionName(s.PodName)
	exchange := func(ctx context.Context, region string) (aws.Credentials, error) {
		region = cmp.Or(region, globalSTSRegion)
		return r.cache.get(ctx, key+"@"+region, func(ctx context.Context) (aws.Credentials, error) {
			return r.assumeRole(ctx, region, roleARN, session, tok)
		})
	}
	creds, err := r.exchangeWithFailover(ctx, s, exchange)
	if err != nil {
		return nil, err
	}
	id := &Identity{Key: key, Credentials: provider{creds: creds}}
	if s.FailoverRegion != "" {
		region := s.FailoverRegion
		id.FailoverCredentials = lazyProvider{region: region, get: func(ctx context.Context) (aws.Credentials, error) {
			return exchange(ctx, region)
		}}
	}
	return id, nil
}

// exchangeWithFailover exchanges the token at the STS of the mount's
// region, or, when that region is remembered as down (Config.Outages), at
// the failover region's first. When the first STS cannot be reached the
// other serves, and a primary region that failed so is reported down.
func (r *Resolver) exchangeWithFailover(ctx context.Context, s *spec.Spec, exchange func(context.Context, string) (aws.Credentials, error)) (aws.Credentials, error) {
	first, second := s.Region, s.FailoverRegion
	skipPrimary := second != "" && r.cfg.Outages != nil && r.cfg.Outages.RegionDown(first)
	if skipPrimary {
		first, second = second, first
	}
	creds, err := exchange(ctx, first)
	if err == nil || second == "" || !errors.Is(err, server.ErrUnavailable) {
		return creds, err
	}
	fcreds, ferr := exchange(ctx, second)
	if ferr != nil {
		return creds, err
	}
	if !skipPrimary && r.cfg.Outages != nil && ctx.Err() == nil {
		r.cfg.Outages.MarkRegionDown(s.Region)
	}
	return fcreds, nil
}

// assumeRole calls STS AssumeRoleWithWebIdentity. Errors never carry tok.
func (r *Resolver) assumeRole(ctx context.Context, region, roleARN, session, tok string) (_ aws.Credentials, err error) {
	defer func(start time.Time) { r.observe(SourceSTS, err, start) }(time.Now())
	client := r.stsClient(region)
	out, err := client.AssumeRoleWithWebIdentity(ctx, &sts.AssumeRoleWithWebIdentityInput{
		RoleArn:          aws.String(roleARN),
		RoleSessionName:  aws.String(session),
		WebIdentityToken: aws.String(tok),
	})
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("assuming role %s with web identity at the STS of %s: %w", roleARN, region, server.Mark(redact(err, tok), stsKind(err)))
	}
	c := out.Credentials
	if c == nil || c.AccessKeyId == nil || c.SecretAccessKey == nil || c.Expiration == nil {
		return aws.Credentials{}, fmt.Errorf("assuming role %s with web identity: STS returned incomplete credentials: %w", roleARN, server.ErrUnavailable)
	}
	return aws.Credentials{
		AccessKeyID:     *c.AccessKeyId,
		SecretAccessKey: *c.SecretAccessKey,
		SessionToken:    aws.ToString(c.SessionToken),
		Source:          irsaSource,
		CanExpire:       true,
		Expires:         *c.Expiration,
		AccountID:       accountID(out.AssumedRoleUser),
	}, nil
}

// stsClient returns the STS client of region, built once from the base
// configuration: the mount's region's STS, so that credentials for the
// failover region come from that region's STS, as the existing provider's.
// Its retryer has no client-side retry budget (the SDK's default token
// bucket, shared by every identity using the client): a cold start of many
// identities against a throttling STS must not run one identity's retries
// dry because of the others'. Each exchange is still bounded by its attempts
// and its deadline.
func (r *Resolver) stsClient(region string) *sts.Client {
	r.stsMu.Lock()
	defer r.stsMu.Unlock()
	if c, ok := r.stsClients[region]; ok {
		return c
	}
	base := r.cfg.AWS.Copy()
	base.Region = region
	base.Credentials = nil // AssumeRoleWithWebIdentity is not signed
	c := sts.NewFromConfig(base, func(o *sts.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.RateLimiter = ratelimit.None
			if base.RetryMaxAttempts > 0 {
				so.MaxAttempts = base.RetryMaxAttempts
			}
		})
		if r.cfg.HTTPClient != nil {
			o.HTTPClient = r.cfg.HTTPClient
		}
		if r.cfg.STSEndpoint != "" {
			o.BaseEndpoint = aws.String(r.cfg.STSEndpoint)
		}
	})
	r.stsClients[region] = c
	return c
}

// sessionName derives a RoleSessionName from the pod name: characters STS
// refuses become '-', and the result is cut to 64 characters.
func sessionName(pod string) string {
	name := invalidSessionChars.ReplaceAllString(pod, "-")
	if len(name) > maxSessionName {
		name = name[:maxSessionName]
	}
	if len(name) < 2 {
		return defaultSessionName
	}
	return name
}

// accountID is the account of the assumed role, "" when unknown.
func accountID(u *types.AssumedRoleUser) string {
	if u == nil {
		return ""
	}
	a, err := arn.Parse(aws.ToString(u.Arn))
	if err != nil {
		return ""
	}
	return a.AccountID
}

// redactedError hides a secret that an inner error's text may contain. The
// inner error stays reachable with errors.As, for its API error code.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact replaces secret in err's text.
func redact(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), secret, "<redacted>"), err: err}
}
