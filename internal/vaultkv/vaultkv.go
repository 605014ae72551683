package vaultkv

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"

	"github.com/keymount/keymount/internal/vaultmsg"
)

// MetadataSecretType is the KV version 2 custom_metadata key that keeps the
// type of the Secret a value was pushed from (kubernetes.io/tls, ...), so a
// SecretMirror reading the path elsewhere writes copies of the same type.
// An Opaque Secret's value carries none.
const MetadataSecretType = "keymount.io/secret-type" //nolint:gosec // G101: a metadata key, not a credential.

// Policy says when a write may replace a value keymount did not write.
type Policy int

const (
	// OwnedOnly replaces only a value keymount wrote; a value identical to
	// the one it would write is adopted without a write; any other value
	// is a conflict (ErrConflict), never replaced.
	OwnedOnly Policy = iota
	// Replace replaces whatever is there (the manifest said so).
	Replace
	// IfNotExists writes only where nothing is, and never again once
	// something is there, keymount's own value included.
	IfNotExists
)

// Result says what Put did.
type Result int

// Put's results.
const (
	Unchanged Result = iota
	Created
	Updated
	// Adopted: the path held the very value keymount would write; it is
	// keymount's from now on, without a write.
	Adopted
	// Skipped: IfNotExists, and the path holds a value.
	Skipped
)

func (r Result) String() string {
	return [...]string{"unchanged", "created", "updated", "adopted", "skipped"}[r]
}

// Wrote tells whether r wrote to the store.
func (r Result) Wrote() bool { return r == Created || r == Updated }

// ErrConflict is a value at the path that keymount did not write: it is
// reported, not replaced.
var ErrConflict = errors.New("the value there was not written by keymount")

// Value is what Put writes: a Secret's data and type.
type Value struct {
	Data map[string][]byte
	Type corev1.SecretType
}

// Digest is a SHA-256 of a Value's data: its keys and bytes (the type is
// kept apart, in custom_metadata).
type Digest [sha256.Size]byte

// Digest returns v's digest.
func (v Value) Digest() Digest {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, k := range slices.Sorted(maps.Keys(v.Data)) {
		field([]byte(k))
		field(v.Data[k])
	}
	var d Digest
	copy(d[:], h.Sum(nil))
	return d
}

func secretType(t corev1.SecretType) corev1.SecretType {
	if t == "" {
		return corev1.SecretTypeOpaque
	}
	return t
}

// Mark is what keymount last wrote at a path: the KV version 2 version (0
// for version 1, which has none) and the digest of the value (zero when
// not known, after a restart).
type Mark struct {
	Version int
	Digest  Digest
}

// KV is one KV secret of a Vault server, written as mirrors writes it: the
// fields under "data", each value standard base64 (the JSON of a Secret's
// bytes), so mirrors and keymount read back the Secret's bytes exactly.
type KV struct {
	// Client carries the token of the identity that writes.
	Client *vaultapi.Client
	// Path is the API path: <mount>/data/<name> on a KV version 2 engine,
	// <mount>/<name> on version 1.
	Path string
	// Version is the engine's KV version (MountVersion).
	Version int
}

// MountVersion is the KV version (1 or 2) of the engine path is on, as
// Vault's own CLI finds it (sys/internal/ui/mounts, which any token with a
// capability on the path may read).
func MountVersion(ctx context.Context, c *vaultapi.Client, path string) (int, error) {
	s, err := c.Logical().ReadWithContext(ctx, "sys/internal/ui/mounts/"+strings.Trim(path, "/"))
	if err != nil {
		return 0, vaultErr("find the engine of", path, err)
	}
	if s == nil || s.Data == nil {
		return 0, fmt.Errorf("find the engine of %s: Vault answered nothing", path)
	}
	if t, _ := s.Data["type"].(string); t != "kv" && t != "generic" {
		return 0, fmt.Errorf("%s is on a %q engine, not KV: keymount pushes to KV secrets only", path, t)
	}
	opts, _ := s.Data["options"].(map[string]any)
	if v, _ := opts["version"].(string); v == "2" {
		return 2, nil
	}
	return 1, nil
}

// Put makes v the value at kv.Path under p, given what keymount last wrote
// there, and returns what keymount wrote there now. An unchanged value
// costs one read (version 2: the metadata; version 1: the secret) and no
// write; a changed one, version 2, one check-and-set write against the
// version keymount last wrote.
func (kv KV) Put(ctx context.Context, v Value, last Mark, p Policy) (Mark, Result, error) {
	if kv.Version == 2 {
		return kv.putV2(ctx, v, last, p)
	}
	return kv.putV1(ctx, v, last, p)
}

// state is a KV version 2 secret's metadata: its current version (0 when
// none), whether that version is deleted or destroyed, and its
// custom_metadata.
type state struct {
	current int
	gone    bool
	custom  map[string]any
}

func (kv KV) putV2(ctx context.Context, v Value, last Mark, p Policy) (Mark, Result, error) {
	mp, ok := MetadataPath(kv.Path)
	if !ok {
		return last, Unchanged, fmt.Errorf("%s names no data segment: a KV version 2 path is <mount>/data/<name>", kv.Path)
	}
	st, err := kv.metadata(ctx, mp)
	if err != nil {
		return last, Unchanged, err
	}
	want := v.Digest()
	var res Result
	switch {
	case st.current == 0 || st.gone:
		// Nothing to lose: no version, or the current one deleted.
		res = Created
	case p == IfNotExists:
		return last, Skipped, nil
	case st.current == last.Version && last.Digest == want:
		res = Unchanged
	case st.current == last.Version && last.Digest != (Digest{}):
		res = Updated
	default:
		// A version keymount did not write, or wrote before a restart
		// (no digest): its content decides.
		there, err := kv.readV2(ctx, st.current)
		if err != nil {
			return last, Unchanged, err
		}
		switch {
		case there.Digest() == want:
			if st.current == last.Version {
				res = Unchanged
			} else {
				res = Adopted
			}
		case st.current == last.Version || p == Replace:
			res = Updated
		default:
			return last, Unchanged, fmt.Errorf("%s is at version %d, %w (%s): not replaced",
				kv.Path, st.current, ErrConflict, wroteWhat(last))
		}
	}
	mark := Mark{Version: st.current, Digest: want}
	if res.Wrote() {
		cas := st.current
		mark.Version, err = kv.writeV2(ctx, v, cas)
		if err != nil {
			return last, Unchanged, err
		}
	}
	return mark, res, kv.recordType(ctx, mp, st, v.Type)
}

// wroteWhat says which version keymount wrote last, for a conflict.
func wroteWhat(last Mark) string {
	if last.Version == 0 {
		return "keymount has written none"
	}
	return fmt.Sprintf("keymount wrote version %d", last.Version)
}

// MetadataPath is the KV version 2 metadata path of a data path: its first
// "data" segment after the mount's first segment becomes "metadata".
func MetadataPath(dataPath string) (string, bool) {
	segs := strings.Split(strings.Trim(dataPath, "/"), "/")
	for i := 1; i < len(segs)-1; i++ {
		if segs[i] == "data" {
			segs[i] = "metadata"
			return strings.Join(segs, "/"), true
		}
	}
	return "", false
}

func (kv KV) metadata(ctx context.Context, mp string) (state, error) {
	s, err := kv.Client.Logical().ReadWithContext(ctx, mp)
	if err != nil {
		return state{}, vaultErr("read the metadata of", mp, err)
	}
	if s == nil || s.Data == nil {
		return state{}, nil
	}
	st := state{current: number(s.Data["current_version"])}
	st.custom, _ = s.Data["custom_metadata"].(map[string]any)
	versions, _ := s.Data["versions"].(map[string]any)
	if cur, ok := versions[strconv.Itoa(st.current)].(map[string]any); ok {
		deleted, _ := cur["deletion_time"].(string)
		destroyed, _ := cur["destroyed"].(bool)
		st.gone = deleted != "" || destroyed
	}
	return st, nil
}

// readV2 reads version of kv.Path, decoded as mirrors decodes it.
func (kv KV) readV2(ctx context.Context, version int) (Value, error) {
	s, err := kv.Client.Logical().ReadWithDataWithContext(ctx, kv.Path, map[string][]string{"version": {strconv.Itoa(version)}})
	if err != nil {
		return Value{}, vaultErr("read", kv.Path, err)
	}
	if s == nil {
		return Value{}, nil
	}
	fields, _ := s.Data["data"].(map[string]any)
	v := Decode(fields)
	if md, ok := s.Data["metadata"].(map[string]any); ok {
		v.Type = TypeOf(md["custom_metadata"])
	}
	return v, nil
}

// writeV2 writes v with a check-and-set against cas and returns the
// version written. A failed check-and-set (another writer came first) is
// ErrConflict.
func (kv KV) writeV2(ctx context.Context, v Value, cas int) (int, error) {
	s, err := kv.Client.Logical().WriteWithContext(ctx, kv.Path, map[string]any{
		"data":    Encode(v.Data),
		"options": map[string]any{"cas": cas},
	})
	if isCASFailure(err) {
		return 0, fmt.Errorf("%s: another writer came first (check-and-set against version %d failed), %w: not replaced", kv.Path, cas, ErrConflict)
	}
	if err != nil {
		return 0, vaultErr("write", kv.Path, err)
	}
	if s == nil || s.Data == nil {
		return 0, fmt.Errorf("write %s: Vault answered without a version", kv.Path)
	}
	return number(s.Data["version"]), nil
}

// recordType keeps the Secret's type in the path's custom_metadata when it
// is not there already (one metadata write when the type changes, none
// otherwise), leaving the other keys as they are.
func (kv KV) recordType(ctx context.Context, mp string, st state, t corev1.SecretType) error {
	want := string(secretType(t))
	have, _ := st.custom[MetadataSecretType].(string)
	if have == want || (have == "" && want == string(corev1.SecretTypeOpaque)) {
		return nil
	}
	custom := map[string]any{}
	maps.Copy(custom, st.custom)
	if want == string(corev1.SecretTypeOpaque) {
		delete(custom, MetadataSecretType)
	} else {
		custom[MetadataSecretType] = want
	}
	if _, err := kv.Client.Logical().WriteWithContext(ctx, mp, map[string]any{"custom_metadata": custom}); err != nil {
		return fmt.Errorf("the value is written, but its Secret type %s is not recorded (the token needs update on %s): %w", want, mp, vaultErr("write", mp, err))
	}
	return nil
}

func (kv KV) putV1(ctx context.Context, v Value, last Mark, p Policy) (Mark, Result, error) {
	s, err := kv.Client.Logical().ReadWithContext(ctx, kv.Path)
	if err != nil {
		return last, Unchanged, vaultErr("read", kv.Path, err)
	}
	want := v.Digest()
	res := Created
	if s != nil {
		have := Decode(FieldsV1(s.Data)).Digest()
		switch {
		case p == IfNotExists:
			return last, Skipped, nil
		case have == want && last.Digest == want:
			return last, Unchanged, nil
		case have == want:
			return Mark{Digest: want}, Adopted, nil
		case have == last.Digest || p == Replace:
			res = Updated
		default:
			return last, Unchanged, fmt.Errorf("%s (KV version 1) holds a value %w: not replaced", kv.Path, ErrConflict)
		}
	}
	if _, err := kv.Client.Logical().WriteWithContext(ctx, kv.Path, map[string]any{"data": Encode(v.Data)}); err != nil {
		return last, Unchanged, vaultErr("write", kv.Path, err)
	}
	return Mark{Digest: want}, res, nil
}

// FieldsV1 is the fields of a KV version 1 answer: those under "data" when
// mirrors wrote it so, else the answer's own.
func FieldsV1(data map[string]any) map[string]any {
	if inner, ok := data["data"].(map[string]any); ok && len(data) == 1 {
		return inner
	}
	return data
}

// Encode is data as mirrors writes it: every value standard base64.
func Encode(data map[string][]byte) map[string]string {
	out := make(map[string]string, len(data))
	for k, v := range data {
		out[k] = base64.StdEncoding.EncodeToString(v)
	}
	return out
}

// Decode is fields as mirrors reads them: a string that is standard base64
// decoded, any other string as it is, anything else as its JSON.
func Decode(fields map[string]any) Value {
	v := Value{Data: make(map[string][]byte, len(fields))}
	for k, val := range fields {
		switch s := val.(type) {
		case string:
			if b, err := base64.StdEncoding.DecodeString(s); err == nil {
				v.Data[k] = b
			} else {
				v.Data[k] = []byte(s)
			}
		default:
			b, _ := json.Marshal(s)
			v.Data[k] = b
		}
	}
	return v
}

// TypeOf is the Secret type a KV version 2 custom_metadata records, Opaque
// when none.
func TypeOf(custom any) corev1.SecretType {
	m, _ := custom.(map[string]any)
	if t, _ := m[MetadataSecretType].(string); t != "" {
		return corev1.SecretType(t)
	}
	return corev1.SecretTypeOpaque
}

func number(v any) int {
	switch n := v.(type) {
	case json.Number:
		i, _ := n.Int64()
		return int(i)
	case float64:
		return int(n)
	}
	return 0
}

// isCASFailure tells whether err is Vault refusing a KV version 2 write
// whose check-and-set version is not the current one.
func isCASFailure(err error) bool {
	var re *vaultapi.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusBadRequest && strings.Contains(vaultmsg.Join(re.Errors), "check-and-set")
}

// vaultErr says what failed on which path, with Vault's own words. The
// *vaultapi.ResponseError stays in the chain.
func vaultErr(op, path string, err error) error {
	return fmt.Errorf("%s %s: %w", op, path, vaultmsg.Refusal(err))
}
