package store

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// DefaultMaxListedAge is the default of Config.MaxListedAge.
const DefaultMaxListedAge = 5 * time.Minute

// ListSecrets limits.
const (
	// listPageSize is the most entries a ListSecrets page holds.
	listPageSize = 100
	// listFilterValues is the most values of one ListSecrets filter.
	listFilterValues = 10
	// listExtraPages is how many pages beyond one per 100 revalidated
	// items a listing may read (secrets sharing the names' prefixes).
	listExtraPages = 4
)

// revalidate runs (or joins) the revalidation of the scope of missing
// (items of one region, missing from the cache) when one of them is a
// listable item whose cached value is only stale. It reports whether one
// ran, so that the cache is worth another look.
func (s *Store) revalidate(ctx context.Context, req *Request, missing []item) bool {
	if s.cfg.MaxListedAge < 0 || len(missing) == 0 {
		return false
	}
	region := missing[0].region
	if s.listDenied(req.Identity, region) || !s.anyStale(req.Identity, missing) {
		return false
	}
	ch := s.lists.DoChan(req.Identity+"\x00"+region, func() (any, error) {
		// A revalidation that ended just before this flight started may
		// have renewed them already.
		if s.anyStale(req.Identity, missing) {
			s.revalidateScope(ctx, req, region)
		}
		return nil, nil
	})
	select {
	case <-ctx.Done():
		return false
	case <-ch:
		return true
	}
}

// anyStale reports whether one of items is listable with a cached value
// past its freshness.
func (s *Store) anyStale(identity string, items []item) bool {
	return slices.ContainsFunc(items, func(it item) bool {
		if !it.listable() {
			return false
		}
		if _, ok := s.cache.get(identity, it); ok {
			return false
		}
		_, ok := s.cache.peek(identity, it)
		return ok
	})
}

// revalidateScope revalidates every listable item identity has cached in
// region: those last read longer ago than MaxListedAge (with the ones
// nearly as old) are read again, the others checked by ListSecrets; an
// item whose version the listing confirms is fresh again, a changed one is
// read with the rest, batched, and one the listing did not show is left
// stale for the normal path. An identity denied ListSecrets is remembered
// and left to the normal path.
func (s *Store) revalidateScope(ctx context.Context, req *Request, region string) {
	now := s.cfg.Clock.Now()
	cached := make(map[item]value)
	for _, it := range s.cache.listed(req.Identity, region) {
		if v, ok := s.cache.peek(req.Identity, it); ok {
			cached[it] = v
		}
	}
	read, check := s.dueForRead(cached, now)
	var renewed []item
	if len(check) > 0 {
		seen, err := s.listSecrets(ctx, req, region, check)
		switch {
		case isAccessDenied(err):
			s.skipList(req.Identity, region, noBatchFor)
			return
		case err != nil && ctx.Err() == nil:
			// Failing otherwise (after the SDK's retries): not again for
			// a freshness window, or every Mount call would try it.
			s.skipList(req.Identity, region, s.cfg.Freshness)
		}
		for _, it := range check {
			v := cached[it]
			cur, ok := currentVersion(seen, it)
			switch {
			case !ok: // not listed (deleted, pending deletion, listing cut short)
			case cur == v.version:
				if s.cache.renew(req.Identity, it, cur, now) {
					renewed = append(renewed, it)
				}
			default:
				read = append(read, it)
			}
		}
	}
	read = s.fillBatches(req.Identity, region, read, renewed, cached)
	s.readAgain(ctx, req, read)
}

// dueForRead splits the cached items into those to read again and those to
// list. When one was last read MaxListedAge ago or longer, every item last
// read half that long ago or longer is read again with it, so that items
// fall due together and fill batches.
func (s *Store) dueForRead(cached map[item]value, now time.Time) (read, check []item) {
	limit := s.cfg.MaxListedAge
	due := false
	for _, v := range cached {
		if now.Sub(v.readAt) >= limit {
			due = true
			break
		}
	}
	for it, v := range cached {
		if due && now.Sub(v.readAt) >= limit/2 {
			read = append(read, it)
		} else {
			check = append(check, it)
		}
	}
	return read, check
}

// fillBatches tops the "latest" items of read up to a multiple of a
// BatchGetSecretValue's 20 names with the renewed ones read longest ago:
// they cost no extra call and are then not due for a while.
func (s *Store) fillBatches(identity, region string, read, renewed []item, cached map[item]value) []item {
	if s.batchDenied(identity, region) {
		return read
	}
	n := 0
	for _, it := range read {
		if it.latest() {
			n++
		}
	}
	room := (secretsPerBatch - n%secretsPerBatch) % secretsPerBatch
	if n == 0 || room == 0 {
		return read
	}
	renewed = slices.DeleteFunc(slices.Clone(renewed), func(it item) bool { return !it.latest() })
	slices.SortFunc(renewed, func(a, b item) int { return cached[a].readAt.Compare(cached[b].readAt) })
	return append(read, renewed[:min(room, len(renewed))]...)
}

// readAgain reads items from the store, batched as any fetch is, whatever
// the cache holds. Failures are left to the normal path: the items stay
// stale.
func (s *Store) readAgain(ctx context.Context, req *Request, items []item) {
	if len(items) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, b := range s.plan(req.Identity, items) {
		wg.Go(func() { s.call(ctx, req, b, newBatchResult()) })
	}
	wg.Wait()
}

// stillMissing returns the items of missing not (or no longer) in the cache,
// putting the others into vals.
func (s *Store) stillMissing(identity string, missing []item, vals map[item]value) []item {
	var out []item
	for _, it := range missing {
		if v, ok := s.cached(identity, it); ok {
			vals[it] = v
		} else {
			out = append(out, it)
		}
	}
	return out
}

// listSecrets lists the secrets whose names start with the prefixes of
// items, paged, and returns them by name and by ARN. It reads at most one
// page per 100 items plus listExtraPages; what it did not reach stays
// unconfirmed. On an error it returns what it saw before.
func (s *Store) listSecrets(ctx context.Context, req *Request, region string, items []item) (map[string]*smtypes.SecretListEntry, error) {
	in := &secretsmanager.ListSecretsInput{MaxResults: aws.Int32(listPageSize)}
	if prefixes := listPrefixes(items); !slices.Contains(prefixes, "") {
		in.Filters = []smtypes.Filter{{Key: smtypes.FilterNameStringTypeName, Values: prefixes}}
	}
	api := s.clientsFor(region).sm
	seen := make(map[string]*smtypes.SecretListEntry, 2*len(items))
	for range len(items)/listPageSize + listExtraPages {
		out, err := api.ListSecrets(ctx, in, s.smOptions(req, region))
		if err != nil {
			return seen, err
		}
		for i := range out.SecretList {
			e := &out.SecretList[i]
			seen[aws.ToString(e.Name)] = e
			seen[aws.ToString(e.ARN)] = e
		}
		if aws.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	return seen, nil
}

// currentVersion is the version id the listing shows for it: the one with
// its staging label, AWSCURRENT for "latest". The name filter matches
// prefixes without case, so an entry counts only by its exact name, or ARN
// for an object named by ARN.
func currentVersion(seen map[string]*smtypes.SecretListEntry, it item) (string, bool) {
	e, ok := seen[it.name]
	if !ok {
		return "", false
	}
	stage := cmp.Or(it.label, currentStage)
	for version, stages := range e.SecretVersionsToStages {
		if slices.Contains(stages, stage) {
			return version, true
		}
	}
	return "", false
}

// listPrefixes returns at most 10 name prefixes that together match every
// item's secret name: the names themselves when there are few, otherwise
// the longest common prefixes of neighbours in sorted order, merged until
// 10 remain. "" among them means every secret.
func listPrefixes(items []item) []string {
	ps := make([]string, 0, len(items))
	for _, it := range items {
		ps = append(ps, nameBase(it.name))
	}
	slices.Sort(ps)
	ps = dropCovered(slices.Compact(ps))
	for len(ps) > listFilterValues {
		best, bestLen := 0, -1
		for i := 0; i+1 < len(ps); i++ {
			if l := commonPrefixLen(ps[i], ps[i+1]); l > bestLen {
				best, bestLen = i, l
			}
		}
		ps = dropCovered(slices.Replace(ps, best, best+2, ps[best][:bestLen]))
	}
	return ps
}

// nameBase is a prefix of the name of the secret called name: the name, or
// for an ARN its name part without the 7-character suffix Secrets Manager
// adds ("" when an ARN has no name part).
func nameBase(name string) string {
	if !strings.HasPrefix(name, "arn:") {
		return name
	}
	_, n, ok := strings.Cut(name, ":secret:")
	if !ok {
		return ""
	}
	if len(n) > 7 && n[len(n)-7] == '-' {
		n = n[:len(n)-7]
	}
	return n
}

// dropCovered drops from sorted prefixes every one another covers.
func dropCovered(sorted []string) []string {
	out := sorted[:0]
	for _, p := range sorted {
		if len(out) > 0 && strings.HasPrefix(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

func commonPrefixLen(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// listDenied reports whether identity was recently denied ListSecrets in
// region, or its listing failed within a freshness window.
func (s *Store) listDenied(identity, region string) bool {
	got, ok := s.noList.Get(cacheKey{identity: identity, item: item{region: region}})
	if !ok {
		return false
	}
	until, ok := got.(time.Time)
	return ok && s.cfg.Clock.Now().Before(until)
}

// skipList remembers for d that identity's listings in region are denied
// or failing.
func (s *Store) skipList(identity, region string, d time.Duration) {
	s.noList.Add(cacheKey{identity: identity, item: item{region: region}}, s.cfg.Clock.Now().Add(d))
}
