package store

import (
	"time"
)

// DefaultRegionDownFor is how long a primary region that failed while its
// failover region served is skipped (Config.RegionDownFor).
const DefaultRegionDownFor = 2 * time.Minute

// RegionDown reports whether region failed recently while a failover
// region served instead: mounts whose class names a failover region go
// there first until Config.RegionDownFor has passed.
func (s *Store) RegionDown(region string) bool {
	return s.markedWithin(s.down, "", region, s.cfg.RegionDownFor)
}

// MarkRegionDown remembers that region failed (unreachable, 5xx or too
// slow) while its failover region answered.
func (s *Store) MarkRegionDown(region string) {
	s.mark(s.down, "", region)
}

// primaryDown reports whether the request's primary region is to be
// skipped: down for everyone, or throttling this identity.
func (s *Store) primaryDown(req *Request) bool {
	return s.RegionDown(req.Region) || s.markedWithin(s.down, req.Identity, req.Region, s.cfg.RegionDownFor)
}

// noteFailover remembers the primary region as down after the failover
// region served objects it failed: region-wide when it was unreachable,
// answered 5xx or timed out, for the identity alone when it throttled (a
// quota is per account).
func (s *Store) noteFailover(req *Request, primary []item, fails map[item]*objectFailure, used []item, vals map[item]value) {
	served := false
	for i := range used {
		if used[i] != primary[i] {
			if _, ok := vals[used[i]]; ok {
				served = true
				break
			}
		}
	}
	if !served {
		return
	}
	throttled := false
	for _, it := range primary {
		f, ok := fails[it]
		if !ok {
			continue
		}
		switch f.kind {
		case KindUnavailable, KindTimeout:
			s.MarkRegionDown(req.Region)
			return
		case KindThrottled:
			throttled = true
		}
	}
	if throttled {
		s.mark(s.down, req.Identity, req.Region)
	}
}
