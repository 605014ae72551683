// Package synchash computes a SecretSync's status.syncHash: a keyed digest
// of the Secret the controller wants to write, cheap enough to compute on
// every refresh and useless offline.
//
// What is hashed (Content): the Secret's type, its data (every key and
// value), its labels and its annotations, plus, when the caller sets them,
// the sources secrets-store-sync-controller v0.0.5 also hashes: the
// SecretProviderClass's UID and generation, the SecretSync's UID and
// generation and its spec.forceSynchronization. v0.0.5 hashes the data and
// those sources (the SecretSync's generation stands for its secretObject
// type, labels and annotations); Content covers the same, and the Secret's
// metadata directly.
//
// How: HMAC-SHA256, keyed with 32 random bytes only the controller holds,
// over an unambiguous encoding (a version tag, then every field
// length-prefixed, maps as counts and pairs sorted by key), so no two
// different Contents encode alike, however keys and values are split. The
// result is 64 lowercase hexadecimal digits (that is what status.syncHash
// holds). Without the key the hash reveals nothing usable about the values:
// no one can test a guessed value against it, which an unkeyed digest of
// low-entropy values would allow. It costs microseconds (BenchmarkHash),
// where v0.0.5 runs 100,000 PBKDF2-SHA512 rounds per object per poll.
//
// The key (KeySource) lives in the Secret keymount-controller-hash-key
// (data.key) in the controller's namespace, created on first use with 32
// bytes from crypto/rand, immutable. Replicas racing to create it agree: the
// loser of the create reads the winner's key. It is cached for the life of
// the process. Deleting the Secret rotates the key: after the controller
// restarts every syncHash changes once.
package synchash
