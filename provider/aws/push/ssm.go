package push

import (
	"context"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// parametersAPI is the part of the SSM client a push uses.
type parametersAPI interface {
	GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
	PutParameter(context.Context, *ssm.PutParameterInput, ...func(*ssm.Options)) (*ssm.PutParameterOutput, error)
	DeleteParameter(context.Context, *ssm.DeleteParameterInput, ...func(*ssm.Options)) (*ssm.DeleteParameterOutput, error)
	ListTagsForResource(context.Context, *ssm.ListTagsForResourceInput, ...func(*ssm.Options)) (*ssm.ListTagsForResourceOutput, error)
}

var _ parametersAPI = (*ssm.Client)(nil)

// ssmParameter is an SSM parameter; its version is the parameter's
// Version. GetParameter answers the value with the version, so head reads
// it, and read serves what head read.
type ssmParameter struct {
	calls

	api   parametersAPI
	name  string
	creds aws.CredentialsProvider
	// value and version are what the last head read.
	value   *content
	version string
}

var _ remote = (*ssmParameter)(nil)

func (p *ssmParameter) opts(o *ssm.Options) { o.Credentials = p.creds }

func (p *ssmParameter) head(ctx context.Context) (string, error) {
	out, err := p.api.GetParameter(ctx, &ssm.GetParameterInput{Name: &p.name, WithDecryption: aws.Bool(true)}, p.opts)
	p.value, p.version = nil, ""
	if codeOf(err) == "ParameterNotFound" {
		return "", nil
	}
	if err != nil {
		return "", p.fail("GetParameter", err)
	}
	p.value = &content{data: []byte(aws.ToString(out.Parameter.Value))}
	p.version = strconv.FormatInt(out.Parameter.Version, 10)
	return p.version, nil
}

func (p *ssmParameter) read(ctx context.Context) (*content, string, error) {
	if p.version == "" {
		if _, err := p.head(ctx); err != nil {
			return nil, "", err
		}
	}
	return p.value, p.version, nil
}

func (p *ssmParameter) marked(ctx context.Context, owner string) (bool, error) {
	out, err := p.api.ListTagsForResource(ctx, &ssm.ListTagsForResourceInput{
		ResourceType: ssmtypes.ResourceTypeForTaggingParameter, ResourceId: &p.name}, p.opts)
	if err != nil {
		return false, p.fail("ListTagsForResource", err)
	}
	for _, t := range out.TagList {
		k, v := aws.ToString(t.Key), aws.ToString(t.Value)
		if (k == OwnerTag && v == owner) || (k == esoTag && v == esoValue) {
			return true, nil
		}
	}
	return false, nil
}

// create puts a new SecureString parameter (encrypted with the account's
// default key), tagged with owner; Overwrite false fails if one exists.
func (p *ssmParameter) create(ctx context.Context, c content, owner string) (string, error) {
	out, err := p.api.PutParameter(ctx, &ssm.PutParameterInput{
		Name: &p.name, Value: aws.String(string(c.data)), Type: ssmtypes.ParameterTypeSecureString,
		Overwrite: aws.Bool(false), Tags: []ssmtypes.Tag{{Key: aws.String(OwnerTag), Value: aws.String(owner)}},
	}, p.opts)
	if codeOf(err) == "ParameterAlreadyExists" {
		return "", errExists
	}
	if err != nil {
		return "", p.fail("PutParameter", err)
	}
	return strconv.FormatInt(out.Version, 10), nil
}

// replace overwrites the parameter, keeping its type. SSM has no
// conditional write: against was checked just before, and a write by
// someone else between that check and this one is lost.
func (p *ssmParameter) replace(ctx context.Context, c content, _ string) (string, error) {
	out, err := p.api.PutParameter(ctx, &ssm.PutParameterInput{Name: &p.name, Value: aws.String(string(c.data)), Overwrite: aws.Bool(true)}, p.opts)
	if err != nil {
		return "", p.fail("PutParameter", err)
	}
	return strconv.FormatInt(out.Version, 10), nil
}

func (p *ssmParameter) remove(ctx context.Context) error {
	_, err := p.api.DeleteParameter(ctx, &ssm.DeleteParameterInput{Name: &p.name}, p.opts)
	if err != nil && codeOf(err) != "ParameterNotFound" {
		return p.fail("DeleteParameter", err)
	}
	return nil
}
