package spec

import (
	"os"
	"regexp"

	"github.com/keymount/keymount/internal/datafrom"
)

// ObjectType is where an object lives.
type ObjectType string

// Object types, as the existing provider names them.
const (
	SecretsManager ObjectType = "secretsmanager"
	SSMParameter   ObjectType = "ssmparameter"
)

// JMESPath extracts one value of a JSON secret into its own file.
type JMESPath struct {
	// Path is the JMESPath expression; Parse checked that it compiles.
	Path string
	// Alias is the objectAlias of the entry, as written.
	Alias string
	// Mode is the entry's filePermission, or the object's Mode when not set.
	Mode os.FileMode
	// FileName is the file the value is written to: the alias with path
	// translation applied.
	FileName string
}

// Failover is the object fetched from the failover region instead.
type Failover struct {
	Name string
	// Version is empty or equal to the primary object's Version.
	Version      string
	VersionLabel string
}

// Object is one entry of the class's `objects` list, validated.
type Object struct {
	// Name is the objectName: a name or an ARN.
	Name string
	// Type is given or inferred from the ARN.
	Type ObjectType
	// Alias is the objectAlias as written ("" when not set).
	Alias string
	// Version is the objectVersion (a Secrets Manager version ID or an SSM
	// parameter version number).
	Version string
	// VersionLabel is the objectVersionLabel (a Secrets Manager staging label
	// or an SSM parameter label).
	VersionLabel string
	// Mode is the filePermission, or the request's default.
	Mode os.FileMode
	// JMESPaths are extra files extracted from a JSON value.
	JMESPaths []JMESPath
	// Failover is the failoverObject, nil when not set.
	Failover *Failover
	// Extract, when set, writes every field of the object's JSON value as
	// its own file under FileName, a directory (keymount's `extract`,
	// External Secrets' dataFrom.extract), instead of the value itself.
	Extract *datafrom.Compiled
	// Find, when set, makes the object every secret or parameter it
	// matches, each its own file under FileName, a directory (keymount's
	// `find`, External Secrets' dataFrom.find). Name is "" then.
	Find *Find
	// FileName is the file the object is written to: the alias, or the name
	// with path translation applied, as the existing provider does.
	FileName string
}

// AddressType is the preferred IP family of the Pod Identity agent.
type AddressType string

// Address types.
const (
	AddressAuto AddressType = "auto"
	AddressIPv4 AddressType = "ipv4"
	AddressIPv6 AddressType = "ipv6"
)

// Spec is a class's parameters, parsed once per mount.
type Spec struct {
	Objects []Object
	// Region is "" when the class does not set it: call SetDefaultRegion
	// with the node's region before using the Spec.
	Region         string
	FailoverRegion string
	// PathTranslation replaces "/" in object names; "" disables it
	// (pathTranslation: "False").
	PathTranslation string
	UsePodIdentity  bool
	// AddressType is AddressAuto unless UsePodIdentity is set.
	AddressType AddressType
	// Namespace, ServiceAccount, PodName and PodUID come from the volume
	// context.
	Namespace, ServiceAccount, PodName, PodUID string
	// Tokens are the service account tokens by audience. Never log them.
	Tokens map[string]string
	// AssumeRoleARN, when set, is the IAM role the pod's identity assumes
	// (STS AssumeRole); the store is then read as that role.
	AssumeRoleARN string
}

// Find is what a find object matches: secrets (Secrets Manager) or
// parameters (Parameter Store) under Path whose name matches Name and that
// carry every tag of Tags.
type Find struct {
	// Path is a name prefix (Secrets Manager) or the parameter path read
	// recursively (Parameter Store, starting with "/"); "" for none.
	Path string
	// Name matches the whole name anywhere (an unanchored regular
	// expression, as External Secrets reads it); nil for any.
	Name *regexp.Regexp
	// Tags must all be on a secret, with these values (Secrets Manager).
	Tags map[string]string
	// Keys makes the found names keys and decodes the values.
	Keys *datafrom.Compiled
}
