package cluster

import "github.com/keymount/keymount/cluster/secretobjects"

// ObserveSecretWrites makes o hear each Secret the sync writes or leaves
// as it is, for metrics; nothing happens when sync is off. Call it before
// the cluster is used.
func (c *Cluster) ObserveSecretWrites(o secretobjects.WriteObserver) {
	if c.sync != nil {
		c.sync.ObserveWrites(o)
	}
}
