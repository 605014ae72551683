// Package identity turns the service account tokens kubelet hands the driver
// into AWS credentials for the pod's identity.
//
// Two identities are supported, as in the existing AWS provider:
//
//   - IRSA (the default): the token for audience sts.amazonaws.com is
//     exchanged with STS AssumeRoleWithWebIdentity for the role named by the
//     service account's eks.amazonaws.com/role-arn annotation.
//   - EKS Pod Identity (usePodIdentity): the token for audience
//     pods.eks.amazonaws.com is sent to the node's Pod Identity agent.
//
// A Resolver trusts the namespace, service account and pod of the spec it
// is given: the provider proves them with the token (internal/satoken)
// before it asks, so the caches and shared exchanges below, keyed by them,
// only ever serve a proven identity.
//
// A Resolver caches the credentials of each identity until shortly before
// they expire and collapses concurrent requests for the same identity, so a
// node makes one exchange per identity per credential lifetime, not one per
// mount. An IRSA identity is a service account and its role, shared by the
// service account's pods; an EKS Pod Identity identity is one pod, since
// the agent tags its credentials with the pod. IRSA credentials come from
// the STS of the mount's region; those of a class's failover region from
// that region's STS, when first used. Credentials AWS refuses are dropped
// with Forget. Every error carries its gRPC code (see errors.go). Tokens and
// credentials never appear in errors or in String().
package identity
