// Package spec parses and validates the parameters of a SecretProviderClass
// written for the AWS provider (aws/secrets-store-csi-driver-provider-aws):
// the `objects` YAML, the top-level options and the pod identity the driver
// adds to the volume context. Parse runs once per mount and reports every
// problem at once, each error wrapping ErrInvalid.
//
// File names, defaults and path translation follow the existing provider so
// that its classes mount the same files here. Parse is stricter in a few
// places where the existing provider would misbehave later: unknown keys,
// two objects writing the same file, malformed versions and file modes, and
// JMESPath expressions that do not compile are rejected up front.
package spec
