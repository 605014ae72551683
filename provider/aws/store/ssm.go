package store

import (
	"context"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// parametersAPI is the part of the SSM client the store uses.
type parametersAPI interface {
	GetParameters(context.Context, *ssm.GetParametersInput, ...func(*ssm.Options)) (*ssm.GetParametersOutput, error)
	GetParametersByPath(context.Context, *ssm.GetParametersByPathInput, ...func(*ssm.Options)) (*ssm.GetParametersByPathOutput, error)
}

var _ parametersAPI = (*ssm.Client)(nil)

// getParameters reads up to 10 parameters, decrypted, in one call. A batch
// holds one selector per name (see plan), so answers map back by name or
// ARN. A StringList value is kept as SSM gives it (comma-separated).
func (s *Store) getParameters(ctx context.Context, req *Request, api parametersAPI, items []item, res *batchResult) error {
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.ssmName()
	}
	region := items[0].region
	retryer, creds := s.retryerFor(req.Identity, region), req.credentialsFor(region)
	out, err := api.GetParameters(ctx, &ssm.GetParametersInput{Names: names, WithDecryption: aws.Bool(true)},
		func(o *ssm.Options) { o.Credentials, o.Retryer = creds, retryer })
	if err != nil {
		return err
	}
	byName := byNameOrARN(out.Parameters, func(p ssmtypes.Parameter) (name, arn *string) { return p.Name, p.ARN })
	invalid := make(map[string]bool, len(out.InvalidParameters))
	for _, n := range out.InvalidParameters {
		invalid[n] = true
	}
	for _, it := range items {
		if p, ok := byName[it.name]; ok {
			res.values[it] = value{data: []byte(aws.ToString(p.Value)), version: strconv.FormatInt(p.Version, 10)}
		} else if invalid[it.ssmName()] {
			res.fails[it] = failure(KindNotFound, "ParameterNotFound: no such parameter, version or label")
		}
	}
	return nil
}
