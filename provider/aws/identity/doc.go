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
// A Resolver caches the credentials of each identity until shortly before
// they expire and collapses concurrent requests for the same identity, so a
// node makes one exchange per identity per credential lifetime, not one per
// mount. Tokens and credentials never appear in errors or in String().
package identity
