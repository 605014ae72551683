// Package class resolves the SecretProviderClass a volume names.
//
// The publish pipeline depends only on the Resolver interface. FileResolver
// reads class manifests from YAML files so the pipeline runs without an API
// server (the CLI, the demo, the conformance tests); a Kubernetes-backed
// resolver plugs in behind the same interface. A bad class file fails only
// the volumes of the classes it holds, not every publish.
package class
