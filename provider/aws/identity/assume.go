package identity

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/server"
)

const (
	// assumeSource is the Source of credentials of a class's assumeRoleArn.
	assumeSource = "keymount-assumerole"
	// assumeDuration is the session asked for: one hour, the most AWS
	// grants a chained role session.
	assumeDuration = time.Hour
	// assumeKeySep joins the pod identity's key and the assumed role.
	assumeKeySep = " assume:"
)

// assume returns the credentials of the class's assumeRoleArn, got from
// STS AssumeRole signed with the pod's own credentials (base), as upstream
// ASCP 3.2 does. They are cached per (pod identity, role) and region until
// Config.Refresh before they expire, like the pod's own: the many mounts of
// one identity and role cost one AssumeRole per session, and the key keeps
// a role that trusts one service account from being served to another.
func (r *Resolver) assume(ctx context.Context, s *spec.Spec, base *Identity) (*Identity, error) {
	role := s.AssumeRoleARN
	key := base.Key + assumeKeySep + role
	session := assumeSessionName(s)
	get := func(ctx context.Context, region string, source aws.CredentialsProvider) (aws.Credentials, error) {
		region = cmp.Or(region, globalSTSRegion)
		return r.cache.get(ctx, key+"@"+region, func(ctx context.Context) (aws.Credentials, error) {
			return r.assumeRoleAs(ctx, region, source, role, session)
		})
	}
	creds, err := get(ctx, s.Region, base.Credentials)
	if err != nil {
		return nil, fmt.Errorf("%s %s of service account %s/%s: %w", spec.KeyAssumeRoleARN, role, s.Namespace, s.ServiceAccount, err)
	}
	id := &Identity{Key: key, Credentials: provider{creds: creds}}
	if base.FailoverCredentials != nil {
		region, source := s.FailoverRegion, base.FailoverCredentials
		id.FailoverCredentials = lazyProvider{region: region, get: func(ctx context.Context) (aws.Credentials, error) {
			return get(ctx, region, source)
		}}
	}
	return id, nil
}

// assumeRoleAs calls STS AssumeRole for role at region's STS, signed with
// source's credentials, through the SDK's stscreds.AssumeRoleProvider.
func (r *Resolver) assumeRoleAs(ctx context.Context, region string, source aws.CredentialsProvider, role, session string) (_ aws.Credentials, err error) {
	defer func(start time.Time) { r.observe(SourceSTS, err, start) }(time.Now())
	p := stscreds.NewAssumeRoleProvider(signedClient{c: r.stsClient(region), creds: source}, role, func(o *stscreds.AssumeRoleOptions) {
		o.RoleSessionName = session
		o.Duration = assumeDuration
	})
	creds, err := p.Retrieve(ctx)
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("assuming role %s at the STS of %s: %w", role, region, server.Mark(err, stsKind(err)))
	}
	creds.Source = assumeSource
	return creds, nil
}

// signedClient signs STS calls with creds: the resolver's STS clients are
// unsigned, for AssumeRoleWithWebIdentity.
type signedClient struct {
	c     *sts.Client
	creds aws.CredentialsProvider
}

var _ stscreds.AssumeRoleAPIClient = signedClient{}

// AssumeRole calls STS AssumeRole with the pod's credentials.
func (c signedClient) AssumeRole(ctx context.Context, in *sts.AssumeRoleInput, optFns ...func(*sts.Options)) (*sts.AssumeRoleOutput, error) {
	return c.c.AssumeRole(ctx, in, append(optFns, func(o *sts.Options) { o.Credentials = c.creds })...)
}

// assumeSessionName names the role session after keymount and the pod's
// identity, which the role's account sees in CloudTrail and in the assumed
// role's ARN: "keymount-<namespace>.<serviceAccount>", characters STS
// refuses made '-', cut to 64 characters.
func assumeSessionName(s *spec.Spec) string {
	name := invalidSessionChars.ReplaceAllString(defaultSessionName+"-"+s.Namespace+"."+s.ServiceAccount, "-")
	if len(name) > maxSessionName {
		name = name[:maxSessionName]
	}
	return name
}
