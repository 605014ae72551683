package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/server"
)

// Defaults of Config.
const (
	DefaultMaxParallel = 8
	DefaultFreshness   = 30 * time.Second
	DefaultCacheSize   = 4096
	DefaultCacheBytes  = 64 << 20
	DefaultMaxAttempts = 5
	DefaultMaxBackoff  = 2 * time.Second

	// noBatchSize bounds the identities remembered as denied
	// BatchGetSecretValue (or DescribeSecret); noBatchFor is how long that
	// is remembered.
	noBatchSize = 1024
	noBatchFor  = 10 * time.Minute
	// retryersSize bounds the (identity, region) retry budgets remembered.
	retryersSize = 1024
)

// Config configures a Store. Zero fields take the defaults.
type Config struct {
	// AWS is the base SDK configuration of every client, as
	// config.LoadDefaultConfig reads it from the standard AWS environment
	// (AWS_USE_FIPS_ENDPOINT, AWS_USE_DUALSTACK_ENDPOINT, AWS_ENDPOINT_URL
	// and AWS_ENDPOINT_URL_SECRETS_MANAGER / _SSM, AWS_CA_BUNDLE, shared
	// config files). Its region is replaced per call and its credentials
	// are never used: every call is signed with the request's. The zero
	// value is the SDK's defaults.
	AWS aws.Config
	// Endpoint, when set, is the BaseEndpoint of every client, over
	// anything in AWS (testing against a local endpoint).
	Endpoint string
	// MaxParallel bounds the store requests in flight across all fetches.
	// A request holds its slot only while it is sent and answered, never
	// while the SDK waits before a retry.
	MaxParallel int
	// Freshness is how long a "latest" (or label) value is shared across
	// pods of one identity.
	Freshness time.Duration
	// MaxListedAge bounds how long a "latest" or staging-label Secrets
	// Manager value may be kept on ListSecrets' word alone: a stale value
	// is revalidated, with every other such value of its identity and
	// region, by one ListSecrets (see the package doc), but ListSecrets is
	// eventually consistent, so a value last read longer ago than this is
	// read again (GetSecretValue or BatchGetSecretValue) at the next
	// revalidation, together with those nearly as old. Zero means
	// DefaultMaxListedAge; a negative value turns revalidation by
	// ListSecrets off (every stale value is read again).
	MaxListedAge time.Duration
	// CacheSize bounds the node-local cache, in entries.
	CacheSize int
	// CacheBytes bounds the node-local cache, in bytes of values, names
	// and versions, so that the provider's memory does not grow with the
	// size of the secrets it serves.
	CacheBytes int64
	// MaxAttempts and MaxBackoff tune the SDK's standard retryer (jittered
	// exponential backoff, always bounded by the caller's deadline). Each
	// (identity, region) has its own retryer, so its own retry budget: one
	// identity throttled or failing does not use up another's retries.
	MaxAttempts int
	MaxBackoff  time.Duration
	// RegionDownFor is how long a primary region is skipped after it failed
	// (unreachable, 5xx, timeout, or throttling an identity) while the
	// failover region served the objects: mounts of classes with that
	// failover region go there first, and to the primary only for what the
	// failover region cannot serve. Afterwards the primary is tried again.
	// Default DefaultRegionDownFor.
	RegionDownFor time.Duration
	// HTTPClient, when set, sends the requests instead of AWS.HTTPClient.
	HTTPClient aws.HTTPClient
	// Clock decides freshness; nil means the real clock.
	Clock clock.PassiveClock
	// Observer, when set, hears every store request and cache lookup.
	Observer Observer
}

// Store fetches objects for many pods. It is safe for concurrent use.
type Store struct {
	cfg     Config
	sem     chan struct{}
	cache   *cache
	flights singleflight.Group

	// noBatch remembers (identity, region) pairs denied BatchGetSecretValue.
	noBatch *lru.Cache
	// noDescribe remembers (identity, region) pairs denied DescribeSecret.
	noDescribe *lru.Cache
	// noList remembers until when (identity, region) pairs are denied
	// ListSecrets, or their listings failing.
	noList *lru.Cache
	// lists collapses the revalidations of one (identity, region).
	lists singleflight.Group
	// listings holds the find listings (names and versions) of each
	// (identity, region, criteria); findFlights collapses identical ones.
	listings    *lru.Cache
	findFlights singleflight.Group
	// down remembers when a region (identity "") or an (identity, region)
	// pair last failed while its failover region served.
	down *lru.Cache

	// retryers holds the retryer (and so the retry budget) of each
	// (identity, region); retryersMu makes creating one atomic.
	retryersMu sync.Mutex
	retryers   *lru.Cache

	mu      sync.Mutex
	clients map[string]*regionClients
}

// regionClients are the SDK clients of one region. Credentials and the
// retryer are set per call, so they are shared by every identity.
type regionClients struct {
	sm  *secretsmanager.Client
	ssm *ssm.Client
}

// New returns a Store with the defaults filled in.
func New(cfg Config) *Store {
	if cfg.MaxParallel <= 0 {
		cfg.MaxParallel = DefaultMaxParallel
	}
	if cfg.Freshness <= 0 {
		cfg.Freshness = DefaultFreshness
	}
	if cfg.MaxListedAge == 0 {
		cfg.MaxListedAge = DefaultMaxListedAge
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = DefaultCacheBytes
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.RegionDownFor <= 0 {
		cfg.RegionDownFor = DefaultRegionDownFor
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Store{
		cfg:        cfg,
		retryers:   lru.New(retryersSize),
		sem:        make(chan struct{}, cfg.MaxParallel),
		cache:      newCache(cfg.CacheSize, cfg.CacheBytes, cfg.Freshness, cfg.Clock),
		clients:    make(map[string]*regionClients),
		noBatch:    lru.New(noBatchSize),
		noDescribe: lru.New(noBatchSize),
		noList:     lru.New(noBatchSize),
		listings:   lru.New(listingsSize),
		down:       lru.New(noBatchSize),
	}
}

// Request is what one mount asks for.
type Request struct {
	// Identity is the cache key of the AWS identity (e.g. the role ARN).
	// Results are never shared across identities.
	Identity string
	// Credentials sign the calls. Pass a cached provider
	// (aws.NewCredentialsCache): the store does not wrap it.
	Credentials aws.CredentialsProvider
	// FailoverCredentials, when set, sign the calls to FailoverRegion
	// instead (credentials from that region's STS); asked only when the
	// failover region is used.
	FailoverCredentials aws.CredentialsProvider
	// Region is the primary region; FailoverRegion ("" for none) is tried
	// once for objects the primary region could not serve.
	Region, FailoverRegion string
	// Objects are the class's objects, validated.
	Objects []spec.Object
	// Current maps a file name to the version the pod has mounted. For a
	// Secrets Manager object read with GetSecretValue by staging label (or
	// "latest" when batches are denied) whose mounted version is cached, a
	// DescribeSecret confirming the label still points at it replaces the
	// GetSecretValue (see the package doc).
	Current map[string]string
}

// Result is what a mount gets: the files and the version of every object.
type Result struct {
	Files    []server.File
	Versions []server.ObjectVersion
}

// credentialsFor returns the credentials that sign calls to region.
func (r *Request) credentialsFor(region string) aws.CredentialsProvider {
	if region == r.FailoverRegion && r.FailoverCredentials != nil {
		return r.FailoverCredentials
	}
	return r.Credentials
}

func (r *Request) validate() error {
	switch {
	case r.Identity == "":
		return fmt.Errorf("no AWS identity: %w", server.ErrInvalidParameters)
	case r.Credentials == nil:
		return fmt.Errorf("no AWS credentials: %w", server.ErrInvalidParameters)
	case r.Region == "":
		return fmt.Errorf("no region: %w", server.ErrInvalidParameters)
	}
	return nil
}

// Fetch returns the files of every object, or a *FetchError naming every
// object that failed.
func (s *Store) Fetch(ctx context.Context, req *Request) (*Result, error) {
	if err := req.validate(); err != nil {
		return nil, err
	}
	// A primary region that failed recently while the failover region
	// served is skipped: the failover region comes first, the primary only
	// for what it cannot serve.
	first, second := req.Region, req.FailoverRegion
	skipPrimary := second != "" && s.primaryDown(req)
	if skipPrimary {
		first, second = second, first
	}
	// Find objects are listed first (in the primary region only): the
	// secrets they match are then read with the other objects, batched
	// together when the primary region comes first. items[i] is the zero
	// item for a find object.
	finds := s.findAll(ctx, req)
	items := make([]item, len(req.Objects))
	var fetch, foundSecrets []item
	for i := range req.Objects {
		if f := finds[i]; f != nil {
			if req.Objects[i].Type == spec.SecretsManager {
				foundSecrets = append(foundSecrets, f.items...)
			}
			continue
		}
		items[i] = req.itemIn(&req.Objects[i], first)
		fetch = append(fetch, items[i])
	}
	listed := make(map[item]bool, len(foundSecrets))
	for _, it := range foundSecrets {
		listed[it] = true
	}
	if req.Region == first {
		fetch, foundSecrets = append(fetch, foundSecrets...), nil
	}

	pctx, cancel := s.primaryContext(ctx, second != "")
	vals, fails := s.fetchItems(pctx, req, fetch, listed)
	cancel()
	if len(foundSecrets) > 0 {
		fv, ff := s.fetchItems(ctx, req, foundSecrets, listed)
		maps.Copy(vals, fv)
		maps.Copy(fails, ff)
	}

	used := items
	if second != "" {
		used = s.failover(ctx, req, items, vals, fails, second)
		if !skipPrimary {
			s.noteFailover(req, items, fails, used, vals)
		}
	}
	return assemble(req.Objects, used, finds, vals, fails)
}

// itemIn is object o as region knows it: its failoverObject in the failover
// region, itself in the primary region.
func (r *Request) itemIn(o *spec.Object, region string) item {
	if region == r.FailoverRegion && region != r.Region {
		return failoverItem(o, region)
	}
	return primaryItem(o, region)
}

// primaryContext leaves a third of the deadline for the failover region when
// there is one: a primary region that hangs must not use all of it.
func (s *Store) primaryContext(ctx context.Context, failover bool) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !failover || !ok {
		return context.WithCancel(ctx)
	}
	budget := time.Until(deadline) * 2 / 3
	return context.WithTimeout(ctx, budget)
}

// failover fetches from region, once and batched again, every object whose
// first fetch failed in a way another region may fix. It returns the item
// used per object.
func (s *Store) failover(ctx context.Context, req *Request, primary []item, vals map[item]value, fails map[item]*objectFailure, region string) []item {
	used := make([]item, len(primary))
	var retry []item
	for i, it := range primary {
		used[i] = it
		if f, ok := fails[it]; ok && failoverWorthy(f) && ctx.Err() == nil {
			used[i] = req.itemIn(&req.Objects[i], region)
			retry = append(retry, used[i])
		}
	}
	if len(retry) == 0 {
		return used
	}
	fv, ff := s.fetchItems(ctx, req, retry, nil)
	for it, v := range fv {
		vals[it] = v
	}
	for it, f := range ff {
		fails[it] = f
	}
	return used
}

// fetchItems returns the value of every item from the cache or the store.
// Items of one call are all in one region. The listed items (secrets a find
// listing just showed, with their current versions) do not start a
// revalidation by listing: one that is missing is known to need a read.
func (s *Store) fetchItems(ctx context.Context, req *Request, items []item, listed map[item]bool) (map[item]value, map[item]*objectFailure) {
	vals := make(map[item]value, len(items))
	fails := make(map[item]*objectFailure)
	var missing []item
	for _, it := range dedupe(items) {
		if v, ok := s.cached(req.Identity, it); ok {
			vals[it] = v
			continue
		}
		missing = append(missing, it)
	}
	unlisted := slices.DeleteFunc(slices.Clone(missing), func(it item) bool { return listed[it] })
	if s.revalidate(ctx, req, unlisted) {
		// A listing may have confirmed (or read) what was stale.
		missing = s.stillMissing(req.Identity, missing, vals)
	}
	if len(missing) > 0 {
		// Plan every item, not only the misses: a concurrent flight may be
		// halfway through filling the cache, and batches built from what
		// one pod happened to miss would not collapse with the others'.
		// Each flight re-checks the cache before calling the store.
		missing = dedupe(items)
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, b := range s.plan(req.Identity, missing) {
		wg.Go(func() {
			res := s.runBatch(ctx, req, b)
			mu.Lock()
			defer mu.Unlock()
			for _, it := range b.items {
				if v, ok := res.values[it]; ok {
					vals[it] = v
				} else {
					fails[it] = res.failureOf(it)
				}
			}
		})
	}
	wg.Wait()
	return vals, fails
}

// batchResult is what one store call (or its cache re-check) produced.
type batchResult struct {
	values map[item]value
	fails  map[item]*objectFailure
	err    *objectFailure // the whole call failed
}

func (r *batchResult) failureOf(it item) *objectFailure {
	if f, ok := r.fails[it]; ok {
		return f
	}
	if r.err != nil {
		return r.err
	}
	return failure(KindInternal, "missing from the store's answer")
}

// runBatch makes one store call for a batch, collapsing identical concurrent
// batches of the same identity into one flight. A follower whose leader was
// canceled while the follower's own context is alive runs the call itself.
func (s *Store) runBatch(ctx context.Context, req *Request, b batch) *batchResult {
	key := b.flightKey(req.Identity)
	for {
		ch := s.flights.DoChan(key, func() (any, error) {
			return s.callBatch(ctx, req, b), nil
		})
		select {
		case <-ctx.Done():
			return &batchResult{err: classify(ctx, ctx.Err())}
		case r := <-ch:
			res, _ := r.Val.(*batchResult)
			if res.err != nil && (res.err.kind == KindCanceled || res.err.kind == KindTimeout) && ctx.Err() == nil && r.Shared {
				continue
			}
			return res
		}
	}
}

// callBatch re-checks the cache (a flight that just ended may have filled
// it), then calls the store for what is still missing and caches the answers.
func (s *Store) callBatch(ctx context.Context, req *Request, b batch) *batchResult {
	res := newBatchResult()
	var todo []item
	for _, it := range b.items {
		if v, ok := s.cached(req.Identity, it); ok {
			res.values[it] = v
		} else {
			todo = append(todo, it)
		}
	}
	if len(todo) == 0 {
		return res
	}
	b.items = todo
	s.call(ctx, req, b, res)
	return res
}

func newBatchResult() *batchResult {
	return &batchResult{values: make(map[item]value), fails: make(map[item]*objectFailure)}
}

// call makes batch b's store call, whatever the cache holds, and caches the
// answers in res and in the cache.
func (s *Store) call(ctx context.Context, req *Request, b batch, res *batchResult) {
	clients := s.clientsFor(b.region)
	var err error
	switch b.op {
	case opSecretsBatch:
		err = s.batchGetSecrets(ctx, req, clients.sm, b.items, res)
	case opSecret:
		err = s.getSecret(ctx, req, clients.sm, b.items[0], res)
	case opParameters:
		err = s.getParameters(ctx, req, clients.ssm, b.items, res)
	}
	if err != nil {
		res.err = classify(ctx, err)
	}
	for it, v := range res.values {
		s.keep(req.Identity, it, v)
	}
}

// keep caches identity's value v of it, and the same value pinned by its
// version, which never changes.
func (s *Store) keep(identity string, it item, v value) {
	s.cache.put(identity, it, v)
	if !it.pinned() && v.version != "" {
		pinned := it
		pinned.version, pinned.label = v.version, ""
		s.cache.put(identity, pinned, v)
	}
}

// retryerFor returns the retryer of identity in region, created once: its
// token bucket is the retry budget of that identity there.
func (s *Store) retryerFor(identity, region string) aws.Retryer {
	key := cacheKey{identity: identity, item: item{region: region}}
	s.retryersMu.Lock()
	defer s.retryersMu.Unlock()
	if r, ok := s.retryers.Get(key); ok {
		if r, ok := r.(aws.Retryer); ok {
			return r
		}
	}
	r := retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = s.cfg.MaxAttempts
		o.MaxBackoff = s.cfg.MaxBackoff
	})
	s.retryers.Add(key, r)
	return r
}

// slotID names the middleware that bounds the requests in flight.
const slotID = "keymount.RequestSlot"

// holdSlot adds to an operation's stack a middleware that takes one of
// the MaxParallel slots for each attempt: after the retry middleware, so
// that the SDK's wait before a retry holds no slot, and around sending and
// reading the answer.
func (s *Store) holdSlot(stack *middleware.Stack) error {
	return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc(slotID,
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			select {
			case s.sem <- struct{}{}:
			case <-ctx.Done():
				return middleware.FinalizeOutput{}, middleware.Metadata{}, ctx.Err()
			}
			defer func() { <-s.sem }()
			return next.HandleFinalize(ctx, in)
		}), "Retry", middleware.After)
}

// clientsFor returns the clients of a region, built once from the base
// configuration.
func (s *Store) clientsFor(region string) *regionClients {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[region]; ok {
		return c
	}
	base := s.cfg.AWS.Copy()
	base.Region = region
	base.Credentials = nil // never the node's: each call passes the pod's
	c := &regionClients{
		sm: secretsmanager.NewFromConfig(base, func(o *secretsmanager.Options) {
			o.APIOptions = append(o.APIOptions, s.holdSlot, s.observe)
			if s.cfg.HTTPClient != nil {
				o.HTTPClient = s.cfg.HTTPClient
			}
			if s.cfg.Endpoint != "" {
				o.BaseEndpoint = aws.String(s.cfg.Endpoint)
			}
		}),
		ssm: ssm.NewFromConfig(base, func(o *ssm.Options) {
			o.APIOptions = append(o.APIOptions, s.holdSlot, s.observe)
			if s.cfg.HTTPClient != nil {
				o.HTTPClient = s.cfg.HTTPClient
			}
			if s.cfg.Endpoint != "" {
				o.BaseEndpoint = aws.String(s.cfg.Endpoint)
			}
		}),
	}
	s.clients[region] = c
	return c
}
