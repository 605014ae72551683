// Package aws is keymount's AWS provider: Secrets Manager secrets and SSM
// Parameter Store parameters, mounted from SecretProviderClasses written for
// the existing AWS provider (aws/secrets-store-csi-driver-provider-aws)
// without changes.
//
// Sub-packages: spec parses and validates a class's parameters; identity
// turns the pod's service account tokens into AWS credentials (IRSA or EKS
// Pod Identity), cached per identity; store fetches objects in batches with a
// node-local cache, retries and region failover.
package aws
