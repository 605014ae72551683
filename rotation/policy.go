package rotation

import "time"

// DefaultInterval is upstream's --rotation-poll-interval default.
const DefaultInterval = 2 * time.Minute

// NodeDefaults is the node's refresh policy, from upstream's switches:
// with rotation off (upstream's default) a mounted volume is never
// refreshed; with it on, a republish refreshes once Interval has passed
// since the provider last answered. Interval 0 refreshes on every
// republish.
type NodeDefaults struct {
	Enabled  bool
	Interval time.Duration
}

// Due reports whether a republish at now refreshes a volume whose provider
// last answered at lastRefresh. A lastRefresh after now (the node's clock
// was set back) is due: waiting for the clock to catch up could take
// anything.
func (n NodeDefaults) Due(lastRefresh, now time.Time) bool {
	since := now.Sub(lastRefresh)
	return n.Enabled && (since >= n.Interval || since < 0)
}
