package spec

import "strings"

// arn is an ARN split into its parts:
// arn:partition:service:region:account-id:resource.
type arn struct {
	partition, service, region, account, resource string
}

// parseARN splits s when it starts with "arn:", as the existing provider
// decides what is an ARN. isARN is false for a plain name.
func parseARN(s string) (a arn, isARN bool) {
	if !strings.HasPrefix(s, "arn:") {
		return arn{}, false
	}
	parts := strings.SplitN(s, ":", 6)
	if len(parts) < 6 {
		return arn{}, true
	}
	return arn{partition: parts[1], service: parts[2], region: parts[3], account: parts[4], resource: parts[5]}, true
}

// valid reports whether every part an object ARN needs is present.
func (a arn) valid() bool {
	return a.partition != "" && a.service != "" && a.region != "" && a.resource != ""
}

// objectType is the object type of the ARN's service, "" when neither.
func (a arn) objectType() ObjectType {
	switch a.service {
	case "secretsmanager":
		return SecretsManager
	case "ssm":
		return SSMParameter
	}
	return ""
}

// maxRoleARN is IAM's limit on a role ARN.
const maxRoleARN = 2048

// parseRoleARN checks assumeRoleArn: empty, or an IAM role ARN
// (arn:<partition>:iam::<12-digit account>:role/<path/name>), the only kind
// STS AssumeRole takes.
func parseRoleARN(p *problems, v string) string {
	if v == "" {
		return ""
	}
	a, isARN := parseARN(v)
	name, isRole := strings.CutPrefix(a.resource, "role/")
	ok := isARN && len(v) <= maxRoleARN && a.partition != "" && a.service == "iam" && a.region == "" &&
		isAccountID(a.account) && isRole && name != "" && !strings.HasSuffix(name, "/") &&
		!strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r > '~' })
	if !ok {
		p.addf("%s: %s is not an IAM role ARN like \"arn:aws:iam::111122223333:role/name\"", KeyAssumeRoleARN, quote(v))
		return ""
	}
	return v
}

// isAccountID reports whether s is a 12-digit AWS account ID.
func isAccountID(s string) bool {
	return len(s) == 12 && strings.Trim(s, "0123456789") == ""
}
