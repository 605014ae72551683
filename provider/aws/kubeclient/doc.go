// Package kubeclient is the AWS provider's one Kubernetes client: a REST
// client of core/v1 only, with the client-side rate limits of its --qps and
// --burst flags. It links no other API group (client-go's clientset links
// all of them, which cost the provider about 20 MiB of resident text), and
// reads objects with plain GETs.
//
// The provider reads the API server only on a cache miss: one ServiceAccount
// GET per new identity (its eks.amazonaws.com/role-arn annotation), one Node
// GET per node (its region label) and, without NODE_NAME, one Pod GET per
// mount of a class without a region; and, to prove the tokens kubelet
// passes in the volume context, the service account issuer's discovery
// document and keys once (GetRaw), or a TokenReview per new token where
// discovery cannot be read (ReviewToken). It requests no tokens. client-go's own defaults (5 a second, 10 at
// once) would hold a node where a hundred pods of new service accounts start
// together to 5 mounts a second; [DefaultQPS] and [DefaultBurst] let a few
// hundred new identities mount at once and keep well over 100 a second after
// that.
package kubeclient
