package synchash

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
)

// KeySize is the length of the HMAC key, in bytes.
const KeySize = 32

// version starts every encoding: a change of the encoding changes it.
const version = "keymount.io/synchash/v1"

// Content is what a syncHash covers: the desired Secret and, optionally,
// what it was built from. Zero source fields are hashed as zero.
type Content struct {
	// Type is the Secret's type.
	Type string
	// Data is the Secret's data.
	Data map[string][]byte
	// Labels and Annotations are the Secret's metadata as written.
	Labels, Annotations map[string]string

	// ClassUID and ClassGeneration identify the SecretProviderClass
	// version the data came from.
	ClassUID        string
	ClassGeneration int64
	// SyncUID and SyncGeneration identify the SecretSync version.
	SyncUID        string
	SyncGeneration int64
	// ForceSynchronization is the SecretSync's spec.forceSynchronization.
	ForceSynchronization string
	// Templates are the SecretSync's template annotations (key → text):
	// changing one is a new version to sync, although the generation stays.
	// Left out of the encoding when empty, so hashes without templates are
	// those of before.
	Templates map[string]string
}

// String names the Content's shape, never its values.
func (c *Content) String() string {
	return fmt.Sprintf("synchash.Content{type: %s, %d data keys, %d labels, %d annotations}",
		c.Type, len(c.Data), len(c.Labels), len(c.Annotations))
}

// Hasher computes syncHashes with one key. It is safe for concurrent use.
type Hasher struct {
	key []byte
}

// New returns a Hasher keyed with key (at least KeySize bytes, copied).
func New(key []byte) (*Hasher, error) {
	if len(key) < KeySize {
		return nil, fmt.Errorf("synchash: the key has %d bytes, want at least %d", len(key), KeySize)
	}
	return &Hasher{key: slices.Clone(key)}, nil
}

// String hides the key.
func (h *Hasher) String() string { return "synchash.Hasher{key: <redacted>}" }

// GoString hides the key from %#v too.
func (h *Hasher) GoString() string { return h.String() }

// Sum returns c's syncHash: HMAC-SHA256 of c's encoding, as 64 lowercase
// hexadecimal digits.
func (h *Hasher) Sum(c *Content) string {
	mac := hmac.New(sha256.New, h.key)
	encode(mac, c)
	return hex.EncodeToString(mac.Sum(nil))
}

// field tags: each field is announced, so fields cannot be confused.
const (
	tagType byte = iota + 1
	tagData
	tagLabels
	tagAnnotations
	tagClassUID
	tagClassGeneration
	tagSyncUID
	tagSyncGeneration
	tagForceSynchronization
	tagTemplates
)

// encoder writes the canonical encoding into a hash (whose Write never
// fails).
type encoder struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64]byte
}

func encode(h hash.Hash, c *Content) {
	e := &encoder{h: h}
	e.bytes([]byte(version))
	e.tag(tagType)
	e.str(c.Type)
	e.tag(tagData)
	e.uint(uint64(len(c.Data)))
	for _, k := range sortedKeys(c.Data) {
		e.str(k)
		e.bytes(c.Data[k])
	}
	e.tag(tagLabels)
	e.strMap(c.Labels)
	e.tag(tagAnnotations)
	e.strMap(c.Annotations)
	e.tag(tagClassUID)
	e.str(c.ClassUID)
	e.tag(tagClassGeneration)
	e.int(c.ClassGeneration)
	e.tag(tagSyncUID)
	e.str(c.SyncUID)
	e.tag(tagSyncGeneration)
	e.int(c.SyncGeneration)
	e.tag(tagForceSynchronization)
	e.str(c.ForceSynchronization)
	if len(c.Templates) > 0 {
		e.tag(tagTemplates)
		e.strMap(c.Templates)
	}
}

func (e *encoder) tag(t byte) {
	e.buf[0] = t
	e.h.Write(e.buf[:1])
}

func (e *encoder) uint(n uint64) {
	e.h.Write(binary.AppendUvarint(e.buf[:0], n))
}

func (e *encoder) int(n int64) {
	e.h.Write(binary.AppendVarint(e.buf[:0], n))
}

func (e *encoder) bytes(b []byte) {
	e.uint(uint64(len(b)))
	e.h.Write(b)
}

func (e *encoder) str(s string) {
	e.uint(uint64(len(s)))
	e.h.Write([]byte(s))
}

func (e *encoder) strMap(m map[string]string) {
	e.uint(uint64(len(m)))
	for _, k := range sortedKeys(m) {
		e.str(k)
		e.str(m[k])
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
