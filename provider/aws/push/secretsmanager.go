package push

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// currentStage is the staging label of a secret's current version.
const currentStage = "AWSCURRENT"

// secretsAPI is the part of the Secrets Manager client a push uses.
type secretsAPI interface {
	DescribeSecret(context.Context, *secretsmanager.DescribeSecretInput, ...func(*secretsmanager.Options)) (*secretsmanager.DescribeSecretOutput, error)
	GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
	CreateSecret(context.Context, *secretsmanager.CreateSecretInput, ...func(*secretsmanager.Options)) (*secretsmanager.CreateSecretOutput, error)
	PutSecretValue(context.Context, *secretsmanager.PutSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error)
	UpdateSecretVersionStage(context.Context, *secretsmanager.UpdateSecretVersionStageInput, ...func(*secretsmanager.Options)) (*secretsmanager.UpdateSecretVersionStageOutput, error)
	DeleteSecret(context.Context, *secretsmanager.DeleteSecretInput, ...func(*secretsmanager.Options)) (*secretsmanager.DeleteSecretOutput, error)
}

var _ secretsAPI = (*secretsmanager.Client)(nil)

// smSecret is a Secrets Manager secret; its version is the VersionId of
// AWSCURRENT.
type smSecret struct {
	calls

	api   secretsAPI
	id    string
	creds aws.CredentialsProvider
	// tags are the secret's tags as the last head saw them.
	tags []smtypes.Tag
}

var _ remote = (*smSecret)(nil)

func (s *smSecret) opts(o *secretsmanager.Options) { o.Credentials = s.creds }

func (s *smSecret) head(ctx context.Context) (string, error) {
	out, err := s.api.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: &s.id}, s.opts)
	if codeOf(err) == "ResourceNotFoundException" {
		return "", nil
	}
	if err != nil {
		return "", s.fail("DescribeSecret", err)
	}
	if out.DeletedDate != nil {
		return "", errDeleting
	}
	s.tags = out.Tags
	for v, stages := range out.VersionIdsToStages {
		if slices.Contains(stages, currentStage) {
			return v, nil
		}
	}
	return "", nil
}

// read asks for AWSCURRENT by name: moto (5.x) answers a GetSecretValue
// without a stage with the version a PutSecretValue last made current,
// not the one UpdateSecretVersionStage did; AWS answers the same for both.
func (s *smSecret) read(ctx context.Context) (*content, string, error) {
	out, err := s.api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &s.id, VersionStage: aws.String(currentStage)}, s.opts)
	if codeOf(err) == "ResourceNotFoundException" {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", s.fail("GetSecretValue", err)
	}
	c := &content{data: out.SecretBinary, binary: true}
	if out.SecretString != nil {
		c = &content{data: []byte(*out.SecretString)}
	}
	return c, aws.ToString(out.VersionId), nil
}

func (s *smSecret) marked(_ context.Context, owner string) (bool, error) {
	return slices.ContainsFunc(s.tags, func(t smtypes.Tag) bool {
		k, v := aws.ToString(t.Key), aws.ToString(t.Value)
		return (k == OwnerTag && v == owner) || (k == esoTag && v == esoValue)
	}), nil
}

func (s *smSecret) create(ctx context.Context, c content, owner string) (string, error) {
	in := &secretsmanager.CreateSecretInput{Name: &s.id, Tags: []smtypes.Tag{{Key: aws.String(OwnerTag), Value: aws.String(owner)}}}
	if c.binary {
		in.SecretBinary = c.data
	} else {
		in.SecretString = aws.String(string(c.data))
	}
	out, err := s.api.CreateSecret(ctx, in, s.opts)
	if codeOf(err) == "ResourceExistsException" {
		return "", errExists
	}
	if err != nil {
		return "", s.fail("CreateSecret", err)
	}
	return aws.ToString(out.VersionId), nil
}

// replace puts c as a new version labelled StagingLabel only, then moves
// AWSCURRENT to it from against: AWS refuses the move when AWSCURRENT is
// no longer on against, and the other writer's value stays current.
func (s *smSecret) replace(ctx context.Context, c content, against string) (string, error) {
	in := &secretsmanager.PutSecretValueInput{SecretId: &s.id, VersionStages: []string{StagingLabel}}
	if c.binary {
		in.SecretBinary = c.data
	} else {
		in.SecretString = aws.String(string(c.data))
	}
	put, err := s.api.PutSecretValue(ctx, in, s.opts)
	if err != nil {
		return "", s.fail("PutSecretValue", err)
	}
	_, err = s.api.UpdateSecretVersionStage(ctx, &secretsmanager.UpdateSecretVersionStageInput{
		SecretId: &s.id, VersionStage: aws.String(currentStage),
		MoveToVersionId: put.VersionId, RemoveFromVersionId: aws.String(against),
	}, s.opts)
	if err != nil {
		if now, herr := s.head(ctx); herr == nil && now != against {
			return "", errMoved
		}
		return "", s.fail("UpdateSecretVersionStage", err)
	}
	return aws.ToString(put.VersionId), nil
}

// remove deletes the secret with Secrets Manager's default recovery window
// (30 days): it can be restored meanwhile.
func (s *smSecret) remove(ctx context.Context) error {
	_, err := s.api.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: &s.id}, s.opts)
	if err != nil && codeOf(err) != "ResourceNotFoundException" {
		return s.fail("DeleteSecret", err)
	}
	return nil
}
