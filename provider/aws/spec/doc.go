// Package spec parses and validates the parameters of a SecretProviderClass
// written for the AWS provider (aws/secrets-store-csi-driver-provider-aws):
// the `objects` YAML, the top-level options and the pod identity the driver
// adds to the volume context. Parse runs once per mount and reports every
// problem at once, each error wrapping ErrInvalid.
//
// The `objects` YAML is decoded as the existing provider decodes it
// (sigs.k8s.io/yaml into JSON-tagged fields): keys in any case, unknown
// keys ignored, scalars given for a string field read as their text. File
// names, defaults and path translation (which applies to jmesPath aliases
// too) follow the existing provider so that its classes mount the same
// files here. Parse is stricter in a few places where the existing provider
// would misbehave later: two objects writing the same file, malformed
// versions and file modes, and JMESPath expressions that do not compile are
// rejected up front.
package spec
