package store

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go"

	"github.com/keymount/keymount/provider/aws/spec"
)

// currentStage is the staging label of a secret's current version.
const currentStage = "AWSCURRENT"

// secretsAPI is the part of the Secrets Manager client the store uses.
type secretsAPI interface {
	BatchGetSecretValue(context.Context, *secretsmanager.BatchGetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.BatchGetSecretValueOutput, error)
	GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
	DescribeSecret(context.Context, *secretsmanager.DescribeSecretInput, ...func(*secretsmanager.Options)) (*secretsmanager.DescribeSecretOutput, error)
	ListSecrets(context.Context, *secretsmanager.ListSecretsInput, ...func(*secretsmanager.Options)) (*secretsmanager.ListSecretsOutput, error)
}

var _ secretsAPI = (*secretsmanager.Client)(nil)

// smOptions signs a call with the request's credentials and retries it
// within the budget of its identity in region.
func (s *Store) smOptions(req *Request, region string) func(*secretsmanager.Options) {
	retryer := s.retryerFor(req.Identity, region)
	creds := req.credentialsFor(region)
	return func(o *secretsmanager.Options) {
		o.Credentials = creds
		o.Retryer = retryer
	}
}

// batchGetSecrets reads the current value of up to 20 secrets in one call.
// An identity denied BatchGetSecretValue falls back to GetSecretValue per
// secret (and is remembered, so later batches go straight there).
func (s *Store) batchGetSecrets(ctx context.Context, req *Request, api secretsAPI, items []item, res *batchResult) error {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.name
	}
	out, err := api.BatchGetSecretValue(ctx, &secretsmanager.BatchGetSecretValueInput{SecretIdList: ids}, s.smOptions(req, items[0].region))
	if isAccessDenied(err) {
		s.denyBatch(req.Identity, items[0].region)
		s.getSecrets(ctx, req, api, items, res)
		return nil
	}
	if err != nil {
		return err
	}
	byID := byNameOrARN(out.SecretValues, func(e smtypes.SecretValueEntry) (name, arn *string) { return e.Name, e.ARN })
	failed := make(map[string]string, len(out.Errors))
	for _, e := range out.Errors {
		failed[aws.ToString(e.SecretId)] = aws.ToString(e.ErrorCode)
	}
	for _, it := range items {
		if e, ok := byID[it.name]; ok {
			res.values[it] = secretValue(e.SecretString, e.SecretBinary, e.VersionId)
		} else if code, ok := failed[it.name]; ok {
			res.fails[it] = codeFailure(code)
		}
	}
	return nil
}

// getSecrets reads secrets one call each, in parallel within the bound.
func (s *Store) getSecrets(ctx context.Context, req *Request, api secretsAPI, items []item, res *batchResult) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, it := range items {
		wg.Go(func() {
			one := &batchResult{values: make(map[item]value, 1), fails: make(map[item]*objectFailure)}
			err := s.getSecret(ctx, req, api, it, one)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.fails[it] = classify(ctx, err)
				return
			}
			if v, ok := one.values[it]; ok {
				res.values[it] = v
			}
		})
	}
	wg.Wait()
}

// getSecret reads one secret: the current value, a version id or a staging
// label.
func (s *Store) getSecret(ctx context.Context, req *Request, api secretsAPI, it item, res *batchResult) error {
	if v, ok := s.unchanged(ctx, req, api, it); ok {
		res.values[it] = v
		return nil
	}
	in := &secretsmanager.GetSecretValueInput{SecretId: aws.String(it.name)}
	if it.version != "" {
		in.VersionId = aws.String(it.version)
	}
	if it.label != "" {
		in.VersionStage = aws.String(it.label)
	}
	out, err := api.GetSecretValue(ctx, in, s.smOptions(req, it.region))
	if err != nil {
		return err
	}
	res.values[it] = secretValue(out.SecretString, out.SecretBinary, out.VersionId)
	return nil
}

// unchanged returns the cached value of a label (or, without batches,
// "latest") item when the version a pod has mounted is cached and
// DescribeSecret says the item's staging label still points at it. Any
// doubt (no mounted version, not cached, DescribeSecret failing, a secret
// pending deletion, the label moved) means false: GetSecretValue decides.
func (s *Store) unchanged(ctx context.Context, req *Request, api secretsAPI, it item) (value, bool) {
	if it.pinned() || s.describeDenied(req.Identity, it.region) {
		return value{}, false
	}
	cur, cached, ok := s.mounted(req, it)
	if !ok {
		return value{}, false
	}
	out, err := api.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(it.name)}, s.smOptions(req, it.region))
	if isAccessDenied(err) {
		s.denyDescribe(req.Identity, it.region)
	}
	if err != nil || out.DeletedDate != nil {
		return value{}, false
	}
	stage := it.label
	if stage == "" {
		stage = currentStage
	}
	if !slices.Contains(out.VersionIdsToStages[cur], stage) {
		return value{}, false
	}
	// Fresh again from now on, and read now: DescribeSecret, unlike
	// ListSecrets, is not eventually consistent.
	cached.fetchedAt, cached.readAt = time.Time{}, time.Time{}
	return cached, true
}

// mounted returns a version id some object of req mapping to it has
// mounted, per req.Current, whose value is in the cache.
func (s *Store) mounted(req *Request, it item) (string, value, bool) {
	for i := range req.Objects {
		o := &req.Objects[i]
		cur := req.Current[o.FileName]
		if cur == "" || o.Type != spec.SecretsManager || (primaryItem(o, it.region) != it && failoverItem(o, it.region) != it) {
			continue
		}
		pinned := it
		pinned.version, pinned.label = cur, ""
		if v, ok := s.cached(req.Identity, pinned); ok {
			return cur, v, true
		}
	}
	return "", value{}, false
}

// secretValue keeps a string secret as its bytes and a binary one as is.
func secretValue(str *string, bin []byte, version *string) value {
	data := bin
	if str != nil {
		data = []byte(*str)
	}
	return value{data: data, version: aws.ToString(version)}
}

func isAccessDenied(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && slices.Contains([]string{"AccessDeniedException", "AccessDenied"}, apiErr.ErrorCode())
}
