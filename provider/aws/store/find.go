package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/server"
)

// Limits of find listings.
const (
	// findMaxPages bounds the pages one find listing reads (100 secrets or
	// 10 parameters a page): a bound against a store that never stops
	// paging, far above any real listing.
	findMaxPages = 2000
	// parametersPerPage is the most parameters a GetParametersByPath page
	// holds.
	parametersPerPage = 10
	// listingsSize bounds the find listings remembered (names and versions
	// only: the values are in the value cache).
	listingsSize = 1024
)

// listed is one secret or parameter a find listing matched: its name and
// its current version ("" when the listing does not show it).
type listed struct {
	name, version string
}

// listing is what one find listing matched, sorted by name, as of when it
// started.
type listing struct {
	at      time.Time
	entries []listed
}

// found is a find object's part of one fetch: the items it matched, in
// name order, and for parameters their values (they come with the
// listing), or why the listing failed.
type found struct {
	region string
	items  []item
	values map[item]value
	fail   *objectFailure
}

// findAll lists, concurrently, what every find object of req matches. The
// result is aligned with req.Objects, nil for the other objects. Find
// objects are listed in the primary region only.
func (s *Store) findAll(ctx context.Context, req *Request) []*found {
	out := make([]*found, len(req.Objects))
	var wg sync.WaitGroup
	for i := range req.Objects {
		if o := &req.Objects[i]; o.Find != nil {
			wg.Go(func() { out[i] = s.find(ctx, req, o) })
		}
	}
	wg.Wait()
	return out
}

// find lists what find object o matches. A secret's cached value whose
// version the listing shows is fresh again (see confirm); a parameter's
// value comes with the listing.
func (s *Store) find(ctx context.Context, req *Request, o *spec.Object) *found {
	region := req.Region
	l, vals, err := s.findListing(ctx, req, o, region)
	if err != nil {
		return &found{region: region, fail: classify(ctx, err)}
	}
	f := &found{region: region, items: make([]item, len(l.entries)), values: vals}
	for i, e := range l.entries {
		f.items[i] = item{typ: o.Type, region: region, name: e.name}
	}
	if o.Type == spec.SecretsManager {
		s.confirm(req.Identity, l, f.items)
	}
	return f
}

// findKey identifies the listing of a find object: identity, region, type
// and the criteria (not the key options, which do not change what is
// listed).
func findKey(identity, region string, o *spec.Object) string {
	return identity + "\x00" + region + "\x00" + string(o.Type) + "\x00" + describeFind(o.Find)
}

// describeFind names a find's criteria: `path "prod/" name "^db" tag
// "team=a"`. It holds no value.
func describeFind(f *spec.Find) string {
	var parts []string
	if f.Path != "" {
		parts = append(parts, fmt.Sprintf("path %q", f.Path))
	}
	if f.Name != nil {
		parts = append(parts, fmt.Sprintf("name %q", f.Name.String()))
	}
	for _, k := range slices.Sorted(maps.Keys(f.Tags)) {
		parts = append(parts, fmt.Sprintf("tag %q", k+"="+f.Tags[k]))
	}
	return strings.Join(parts, " ")
}

// listResult is what a listing flight hands to its callers.
type listResult struct {
	l      *listing
	values map[item]value
}

// findListing returns the listing of o: the cached one while it is within
// Config.Freshness, else a new one, made once for concurrent identical
// requests (singleflight). A parameter listing is reused only while every
// value it found is still cached at the version it found.
func (s *Store) findListing(ctx context.Context, req *Request, o *spec.Object, region string) (*listing, map[item]value, error) {
	key := findKey(req.Identity, region, o)
	if r, ok := s.freshListing(req.Identity, key, o, region); ok {
		return r.l, r.values, nil
	}
	for {
		ch := s.findFlights.DoChan(key, func() (any, error) {
			// A flight that just ended may have listed already.
			if r, ok := s.freshListing(req.Identity, key, o, region); ok {
				return r, nil
			}
			r, err := s.list(ctx, req, o, region)
			if err != nil {
				return nil, err
			}
			s.listings.Add(key, r.l)
			return r, nil
		})
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case r := <-ch:
			if r.Err != nil {
				// A follower whose leader was canceled lists itself.
				if r.Shared && ctx.Err() == nil && (errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, context.DeadlineExceeded)) {
					continue
				}
				return nil, nil, r.Err
			}
			res, _ := r.Val.(*listResult)
			return res.l, res.values, nil
		}
	}
}

// freshListing returns the cached listing of key while it is fresh, with
// the cached values of a parameter listing, and reports the lookup.
func (s *Store) freshListing(identity, key string, o *spec.Object, region string) (*listResult, bool) {
	r, ok := s.cachedListing(identity, key, o, region)
	if s.cfg.Observer != nil {
		s.cfg.Observer.CacheLookup(ok)
	}
	return r, ok
}

func (s *Store) cachedListing(identity, key string, o *spec.Object, region string) (*listResult, bool) {
	got, ok := s.listings.Get(key)
	l, _ := got.(*listing)
	if !ok || l == nil || s.cfg.Clock.Since(l.at) >= s.cfg.Freshness {
		return nil, false
	}
	r := &listResult{l: l}
	if o.Type != spec.SSMParameter {
		return r, true
	}
	r.values = make(map[item]value, len(l.entries))
	for _, e := range l.entries {
		it := item{typ: spec.SSMParameter, region: region, name: e.name}
		v, cached := s.cache.peek(identity, it)
		if !cached || v.version != e.version {
			return nil, false
		}
		r.values[it] = v
	}
	return r, true
}

// list makes the listing of o: ListSecrets or GetParametersByPath, paged.
func (s *Store) list(ctx context.Context, req *Request, o *spec.Object, region string) (*listResult, error) {
	if o.Type == spec.SSMParameter {
		return s.listParameters(ctx, req, o.Find, region)
	}
	l, err := s.listFound(ctx, req, o.Find, region)
	if err != nil {
		return nil, err
	}
	return &listResult{l: l}, nil
}

// listFound lists the secrets find f matches: ListSecrets, paged (100 a
// page), filtered by f's path (a name prefix) and tags where the API can,
// then checked exactly here (the name filter matches without case, the tag
// filters any of the keys and any of the values), with f's name regexp.
// Secrets pending deletion are skipped.
func (s *Store) listFound(ctx context.Context, req *Request, f *spec.Find, region string) (*listing, error) {
	l := &listing{at: s.cfg.Clock.Now()}
	in := &secretsmanager.ListSecretsInput{MaxResults: aws.Int32(listPageSize), Filters: findFilters(f)}
	api := s.clientsFor(region).sm
	for range findMaxPages {
		out, err := api.ListSecrets(ctx, in, s.smOptions(req, region))
		if err != nil {
			return nil, err
		}
		for i := range out.SecretList {
			e := &out.SecretList[i]
			if e.DeletedDate == nil && secretMatches(f, e) {
				l.entries = append(l.entries, listed{name: aws.ToString(e.Name), version: listedCurrent(e)})
			}
		}
		if aws.ToString(out.NextToken) == "" {
			sortListed(l.entries)
			return l, nil
		}
		in.NextToken = out.NextToken
	}
	return nil, failure(KindInvalid, "the listing has more than %d pages; narrow path or tags", findMaxPages)
}

// findFilters are the ListSecrets filters of f: its path as a name prefix,
// its tag keys and values (each at most 10; a value starting with "!", which
// the API reads as a negation, or empty is checked here only).
func findFilters(f *spec.Find) []smtypes.Filter {
	var out []smtypes.Filter
	usable := func(v string) bool { return v != "" && !strings.HasPrefix(v, "!") }
	if usable(f.Path) {
		out = append(out, smtypes.Filter{Key: smtypes.FilterNameStringTypeName, Values: []string{f.Path}})
	}
	var keys, values []string
	for _, k := range slices.Sorted(maps.Keys(f.Tags)) {
		if usable(k) && len(keys) < listFilterValues {
			keys = append(keys, k)
		}
		if v := f.Tags[k]; usable(v) && len(values) < listFilterValues && !slices.Contains(values, v) {
			values = append(values, v)
		}
	}
	if len(keys) > 0 {
		out = append(out, smtypes.Filter{Key: smtypes.FilterNameStringTypeTagKey, Values: keys})
	}
	if len(values) > 0 {
		out = append(out, smtypes.Filter{Key: smtypes.FilterNameStringTypeTagValue, Values: values})
	}
	return out
}

// secretMatches checks a listed secret against f exactly: its name starts
// with the path (with case), matches the name regexp anywhere, and it
// carries every tag with its value.
func secretMatches(f *spec.Find, e *smtypes.SecretListEntry) bool {
	name := aws.ToString(e.Name)
	if !strings.HasPrefix(name, f.Path) || (f.Name != nil && !f.Name.MatchString(name)) {
		return false
	}
	for k, v := range f.Tags {
		if !slices.ContainsFunc(e.Tags, func(t smtypes.Tag) bool { return aws.ToString(t.Key) == k && aws.ToString(t.Value) == v }) {
			return false
		}
	}
	return true
}

// listedCurrent is the version id a listing shows as AWSCURRENT.
func listedCurrent(e *smtypes.SecretListEntry) string {
	for version, stages := range e.SecretVersionsToStages {
		if slices.Contains(stages, currentStage) {
			return version
		}
	}
	return ""
}

func sortListed(entries []listed) {
	slices.SortFunc(entries, func(a, b listed) int { return strings.Compare(a.name, b.name) })
}

// listParameters reads every parameter under f's path, recursively and
// decrypted (GetParametersByPath, 10 a page), keeping those whose name
// matches f's name regexp. The values come with the listing: they are
// cached like values read by name, and no other call reads them.
func (s *Store) listParameters(ctx context.Context, req *Request, f *spec.Find, region string) (*listResult, error) {
	r := &listResult{l: &listing{at: s.cfg.Clock.Now()}, values: map[item]value{}}
	in := &ssm.GetParametersByPathInput{
		Path: aws.String(f.Path), Recursive: aws.Bool(true), WithDecryption: aws.Bool(true),
		MaxResults: aws.Int32(parametersPerPage),
	}
	api := s.clientsFor(region).ssm
	retryer, creds := s.retryerFor(req.Identity, region), req.credentialsFor(region)
	for range findMaxPages {
		out, err := api.GetParametersByPath(ctx, in, func(o *ssm.Options) { o.Credentials, o.Retryer = creds, retryer })
		if err != nil {
			return nil, err
		}
		for _, p := range out.Parameters {
			name := aws.ToString(p.Name)
			if f.Name != nil && !f.Name.MatchString(name) {
				continue
			}
			v := value{data: []byte(aws.ToString(p.Value)), version: strconv.FormatInt(p.Version, 10)}
			it := item{typ: spec.SSMParameter, region: region, name: name}
			r.l.entries = append(r.l.entries, listed{name: name, version: v.version})
			r.values[it] = v
			s.keep(req.Identity, it, v)
		}
		if aws.ToString(out.NextToken) == "" {
			sortListed(r.l.entries)
			return r, nil
		}
		in.NextToken = out.NextToken
	}
	return nil, failure(KindInvalid, "the listing has more than %d pages; narrow the path", findMaxPages)
}

// confirm makes fresh again, from the listing's time, every cached value of
// items (the listing's entries, in order) whose version the listing shows
// as current: those cost no read. As with revalidation by listing (which
// ListSecrets' eventual consistency bounds), a value read Config.MaxListedAge
// ago or longer is not confirmed, and then neither is any read half that
// long ago or longer, so that they are read again together; a negative
// MaxListedAge confirms nothing.
func (s *Store) confirm(identity string, l *listing, items []item) {
	limit := s.cfg.MaxListedAge
	if limit < 0 {
		return
	}
	cached := make([]value, len(items))
	has := make([]bool, len(items))
	due := false
	for i, it := range items {
		cached[i], has[i] = s.cache.peek(identity, it)
		if has[i] && l.at.Sub(cached[i].readAt) >= limit {
			due = true
		}
	}
	for i, it := range items {
		v, version := cached[i], l.entries[i].version
		if !has[i] || version == "" || v.version != version || (due && l.at.Sub(v.readAt) >= limit/2) {
			continue
		}
		s.cache.renew(identity, it, version, l.at)
	}
}

// foundFiles is a find object's files, one per secret or parameter found
// (its name made a key by the object's key options) under the object's file
// name, and its version: a digest of the found names and their versions.
// A secret that was listed but is gone when read (deleted meanwhile) is
// left out; any other failure to read one fails the object, naming the
// secret.
func foundFiles(o *spec.Object, f *found, vals map[item]value, fails map[item]*objectFailure) ([]server.File, string, *objectFailure) {
	byName := make(map[string][]byte, len(f.items))
	h := sha256.New()
	var worst *objectFailure
	for _, it := range f.items {
		v, ok := f.values[it]
		if !ok {
			v, ok = vals[it]
		}
		if !ok {
			fl := fails[it]
			if fl == nil {
				fl = failure(KindInternal, "not fetched")
			}
			if fl.kind == KindNotFound {
				continue
			}
			if worst == nil || slices.Index(kindOrder, fl.kind) < slices.Index(kindOrder, worst.kind) {
				worst = &objectFailure{kind: fl.kind, code: fl.code, reason: fmt.Sprintf("%s %q: %s", it.typ, it.name, fl.reason)}
			}
			continue
		}
		byName[it.name] = v.data
		_, _ = fmt.Fprintf(h, "%s\x00%s\x00", it.name, v.version) // a hash never fails
	}
	if worst != nil {
		return nil, "", worst
	}
	keys, err := o.Find.Keys.Found(byName)
	if err != nil {
		return nil, "", failure(KindInvalid, "find: %s", err)
	}
	return server.DirFiles(o.FileName, o.Mode, keys), hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// findError is failure f of find object o, listed in region.
func findError(o *spec.Object, region string, f *objectFailure) ObjectError {
	return ObjectError{
		FileName: o.FileName, Type: string(o.Type), Find: describeFind(o.Find), Region: region,
		Kind: f.kind, Reason: f.reason, Code: f.code,
	}
}
