// Package noderegion tells the AWS region of a mount whose
// SecretProviderClass sets no region, as the existing AWS provider does:
// the provider's configured region when there is one (--region, which
// defaults to $AWS_REGION: the existing provider prefers AWS_REGION over the
// node), else the topology.kubernetes.io/region label of the node the pod
// runs on.
//
// The node is the provider's own node when the provider knows its name
// (--node-name, $NODE_NAME from the downward API): one node read per
// process. Otherwise the pod is read for its spec.nodeName on every such
// mount, as the existing provider does, which needs get on pods as well as
// on nodes. A node's region is remembered once read; a missing label is not,
// so a node labelled late is seen on kubelet's retry.
package noderegion
