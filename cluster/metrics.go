package cluster

import "github.com/keymount/keymount/cluster/secretsync"

// ObserveSecretWrites makes o hear each Secret the sync writes or leaves
// as it is, for metrics; nothing happens when sync is off. Call it before
// the cluster is used.
func (c *Cluster) ObserveSecretWrites(o secretsync.WriteObserver) {
	if c.sync != nil {
		c.sync.ObserveWrites(o)
	}
}
