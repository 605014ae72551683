// Package store fetches Secrets Manager secrets and SSM parameters for the
// AWS provider: in batches, through a node-local cache shared by every pod of
// one AWS identity, with bounded parallelism, the SDK's retries and region
// failover.
//
// # Calls
//
// Secrets Manager objects that follow the current value are read with
// BatchGetSecretValue, 20 names a call. Objects pinned to a version id or a
// staging label are read with GetSecretValue, one call each. SSM parameters
// are read with GetParameters, 10 a call, with "name:version" or "name:label"
// selectors and decryption on. When an identity may not call
// BatchGetSecretValue (an IAM policy written for the existing provider grants
// GetSecretValue only), the store falls back to GetSecretValue per secret and
// remembers that for the identity and region.
//
// On a refresh (Request.Current names the version a pod has mounted)
// that a listing did not settle (see below), a Secrets Manager object read with GetSecretValue by staging label, or
// "latest" when the identity may not batch, is first checked with
// DescribeSecret when its mounted version's value is in the cache: if the
// label still points at that version id, the cached value is served, with
// no secret value sent and no KMS decrypt. Otherwise (label moved, version
// not cached, DescribeSecret failing or denied, secret pending deletion)
// GetSecretValue reads it as usual. An identity denied DescribeSecret is
// remembered like one denied batches.
//
// # Revalidation by listing
//
// When a "latest" or staging-label Secrets Manager value is asked for
// whose cached value is past its freshness, the store first revalidates,
// at once, every such value the identity has cached in that region (an
// index of them, bounded by the cache, loses an entry with its value):
// one ListSecrets, paged (100 a page), filtered by up to 10 name prefixes
// that cover the names, shows each secret's SecretVersionsToStages. A
// value whose label (AWSCURRENT for "latest") still points at the cached
// version is fresh again without a value read; changed ones are read,
// batched; one the listing does not show (deleted, pending deletion, an
// ARN that is not the full one) stays stale and is read as usual. The
// prefix filter matches without case, so entries count by exact name, or
// by ARN for an object named by ARN. One revalidation per (identity,
// region) runs at a time (singleflight), so the Mount calls of many
// classes of one identity in the same window cost one listing, and the
// listing is seen by the Observer like every request.
//
// ListSecrets is eventually consistent. A value confirmed by listings only
// is therefore read directly again at the first revalidation after
// Config.MaxListedAge (5 minutes) since it was read, with every value of
// the identity and region read half that long ago or longer (so that they
// fall due together), and the "latest" ones topped up to a multiple of 20
// with the confirmed ones read longest ago: full BatchGetSecretValue calls,
// and no listing when all are read. An identity denied ListSecrets is
// remembered for 10 minutes and served as without it (a listing failing
// otherwise is not tried again for a freshness window); a negative
// MaxListedAge turns revalidation by listing off.
//
// Batches skip DescribeSecret: one BatchGetSecretValue returns the values
// and versions of 20 secrets, while DescribeSecret costs one call per
// secret, so checking first would only add calls; and a provider must
// return every file on a refresh anyway.
//
// # Find objects
//
// A find object (keymount's find, External Secrets' dataFrom.find) is
// every secret or parameter its criteria match, each its own file under
// the object's file name, named by datafrom's rules (a found name's "/"
// becomes "_" unless rewritten). Secrets Manager: one ListSecrets, paged
// (100 a page), filtered by the path as a name prefix and by the tag keys
// and values, then checked here exactly (the name filter matches without
// case, the tag filters any key and any value), with the name regexp
// matched anywhere in the name; secrets pending deletion are skipped. The
// current values of the matches are then read like objects named
// "latest", batched with the request's other objects (BatchGetSecretValue,
// 20 a call), through the same cache and flights; a cached value whose
// version the listing shows as AWSCURRENT is fresh again without a read
// (as revalidation by listing, bounded by MaxListedAge). Parameter Store:
// GetParametersByPath (recursive, decrypted, 10 a page) with the name
// regexp; its values come with it and are cached like values read by
// name. A listing is cached per (identity, region, criteria) for
// Config.Freshness (names and versions only; a parameter listing is
// reused only while its values are cached) and concurrent identical
// listings collapse (singleflight): the pods of one identity cost one
// listing per freshness window, and a refresh reads only the secrets that
// are new or changed. A secret created later arrives with the first
// listing after the window, one deleted leaves; one listed but gone when
// read is left out. No match is no file. The object's version is a digest
// of the found names and their versions, so it changes when one is added,
// removed or changed. Find objects are listed and read in the primary
// region only: a failover region serves named objects (failoverObject
// names them there), and a find would need its own criteria there.
//
// # Cache
//
// Every value is cached by (identity, region, type, name, selector) in an
// LRU bounded in entries (Config.CacheSize) and in bytes
// (Config.CacheBytes). A value pinned by version (a Secrets Manager version
// id or an SSM version number) never changes and is
// reused until evicted; a "latest" or label value is reused for
// Config.Freshness, so pods refreshed together share one store call per batch.
// Concurrent identical batches collapse into one call (singleflight), and the
// cache is checked again inside the flight, so a whole fleet of pods costs
// about one call per batch per freshness window. Results are never shared
// across identities.
//
// # Failures
//
// Throttling and 5xx answers are retried by the SDK's standard retryer with
// jittered backoff inside the caller's deadline. Each (identity, region) has
// its own retryer, so its own retry budget (the SDK's retry token bucket):
// an identity whose calls keep failing stops being retried without taking
// another identity's retries. Config.MaxParallel bounds the requests in
// flight; a request holds its slot while it is sent and answered, never
// while the SDK waits before retrying it. When a region still fails
// with 5xx, throttling or a timeout and the request names a failover region,
// the failed objects are fetched once, batched again, from the failover
// region (with their failoverObject names and versions). A primary region
// that failed so while the failover region served is then skipped for
// Config.RegionDownFor (2 minutes): the failover region first, the primary
// only for what it cannot serve; region-wide when the primary was
// unreachable, answered 5xx or timed out, for the one identity when it
// throttled. [Store.RegionDown] shares that with IRSA's STS exchange.
// Per-object failures
// are aggregated into one [FetchError]; its gRPC code is that of the most
// permanent failure. No value is ever logged or put into an error.
package store
