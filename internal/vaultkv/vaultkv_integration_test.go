//go:build integration && vault

package vaultkv_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/keymount/keymount/internal/vaultkv"
	"github.com/keymount/keymount/tests/vaultenv"
)

// TestKVAgainstVault runs every rule of vaultkv.KV against a real Vault
// (tests/vaultenv: KV version 2 at secret/, version 1 at kv1/).
func TestKVAgainstVault(t *testing.T) {
	v := vaultenv.Start(t, vaultenv.Options{})
	t.Run("engine versions", func(t *testing.T) { testMountVersion(t, v) })
	t.Run("v2: one write per change, none when unchanged", func(t *testing.T) { testV2Writes(t, v) })
	t.Run("v2: someone else's version is not replaced", func(t *testing.T) { testV2Conflict(t, v) })
	t.Run("v2: identical value adopted, restart costs one read", func(t *testing.T) { testV2Adopt(t, v) })
	t.Run("v2: two writers racing, one wins, nothing lost", func(t *testing.T) { testV2Race(t, v) })
	t.Run("v2: IfNotExists", func(t *testing.T) { testV2IfNotExists(t, v) })
	t.Run("v2: the Secret type in custom_metadata", func(t *testing.T) { testV2Type(t, v) })
	t.Run("v1: mirrors' shape, conflicts by content", func(t *testing.T) { testV1(t, v) })
}

func value(kv ...string) vaultkv.Value {
	v := vaultkv.Value{Data: map[string][]byte{}, Type: corev1.SecretTypeOpaque}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Data[kv[i]] = []byte(kv[i+1])
	}
	return v
}

// current reads path's current KV version 2 value, decoded.
func current(t *testing.T, v *vaultenv.Vault, path string) (map[string]string, int) {
	t.Helper()
	s, err := v.Client.Logical().ReadWithContext(t.Context(), path)
	if err != nil || s == nil {
		t.Fatalf("read %s: %v (%v)", path, s, err)
	}
	fields, _ := s.Data["data"].(map[string]any)
	out := map[string]string{}
	for k, b := range vaultkv.Decode(fields).Data {
		out[k] = string(b)
	}
	md, _ := s.Data["metadata"].(map[string]any)
	return out, number(t, md["version"])
}

func number(t *testing.T, v any) int {
	t.Helper()
	n, ok := v.(interface{ Int64() (int64, error) })
	if !ok {
		t.Fatalf("%v (%T) is not a number", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return int(i)
}

func put(t *testing.T, kv vaultkv.KV, val vaultkv.Value, last vaultkv.Mark, p vaultkv.Policy, want vaultkv.Result) vaultkv.Mark {
	t.Helper()
	m, r, err := kv.Put(t.Context(), val, last, p)
	if err != nil || r != want {
		t.Fatalf("Put %s: %v, %v; want %v", kv.Path, r, err, want)
	}
	return m
}

func testMountVersion(t *testing.T, v *vaultenv.Vault) {
	for path, want := range map[string]int{"secret/data/a/b": 2, vaultenv.KVv1Mount + "/a/b": 1} {
		if got, err := vaultkv.MountVersion(t.Context(), v.Client, path); err != nil || got != want {
			t.Errorf("MountVersion(%s) = %d, %v; want %d", path, got, err, want)
		}
	}
	if _, err := vaultkv.MountVersion(t.Context(), v.Client, vaultenv.PKIMount+"/issue/x"); err == nil {
		t.Error("MountVersion of a PKI path: no error, want one naming the engine")
	}
}

// testV2Writes: a new path is created with a check-and-set of 0; the same
// value again reads the metadata only and writes nothing; a change is one
// write, bytes kept exactly (not UTF-8 included), as mirrors writes them.
func testV2Writes(t *testing.T, v *vaultenv.Vault) {
	kv := vaultkv.KV{Client: v.Client, Path: "secret/data/w/app", Version: 2}
	m := put(t, kv, value("user", "app", "bin", "\xff\x00"), vaultkv.Mark{}, vaultkv.OwnedOnly, vaultkv.Created)
	if m.Version != 1 {
		t.Fatalf("version %d, want 1", m.Version)
	}
	a := v.Audit(t)
	reads, meta, writes := a.Count("read", "secret/data/w/app"), a.Count("read", "secret/metadata/w/app"), a.Count("update", "secret/data/w/app")
	m = put(t, kv, value("user", "app", "bin", "\xff\x00"), m, vaultkv.OwnedOnly, vaultkv.Unchanged)
	a = v.Audit(t)
	if a.Count("read", "secret/data/w/app") != reads || a.Count("update", "secret/data/w/app") != writes || a.Count("read", "secret/metadata/w/app") != meta+1 {
		t.Errorf("unchanged: reads %d→%d, writes %d→%d, metadata reads %d→%d; want one metadata read only",
			reads, a.Count("read", "secret/data/w/app"), writes, a.Count("update", "secret/data/w/app"), meta, a.Count("read", "secret/metadata/w/app"))
	}
	m = put(t, kv, value("user", "app2", "bin", "\xff\x00"), m, vaultkv.OwnedOnly, vaultkv.Updated)
	if a2 := v.Audit(t); a2.Count("read", "secret/data/w/app") != reads {
		t.Errorf("a change read the value (%d reads, want %d): versions are compared, not values", a2.Count("read", "secret/data/w/app"), reads)
	}
	got, ver := current(t, v, "secret/data/w/app")
	if m.Version != 2 || ver != 2 || got["user"] != "app2" || got["bin"] != "\xff\x00" {
		t.Errorf("after a change: mark %d, Vault version %d, %q; want 2, user=app2 and the bytes kept", m.Version, ver, got)
	}
}

// testV2Conflict: a version someone else wrote after keymount's is not
// replaced (the error names the versions); Replace replaces it.
func testV2Conflict(t *testing.T, v *vaultenv.Vault) {
	kv := vaultkv.KV{Client: v.Client, Path: "secret/data/c/app", Version: 2}
	m := put(t, kv, value("k", "mine"), vaultkv.Mark{}, vaultkv.OwnedOnly, vaultkv.Created)
	v.PutKVv2(t, "c/app", map[string]any{"k": "theirs"})
	_, _, err := kv.Put(t.Context(), value("k", "mine-2"), m, vaultkv.OwnedOnly)
	if !errors.Is(err, vaultkv.ErrConflict) || err.Error() != "secret/data/c/app is at version 2, the value there was not written by keymount (keymount wrote version 1): not replaced" {
		t.Fatalf("Put over someone else's version: %v, want ErrConflict naming both versions", err)
	}
	if got, ver := current(t, v, "secret/data/c/app"); got["k"] != "theirs" || ver != 2 {
		t.Fatalf("after the refused push: %q version %d, want theirs at 2", got, ver)
	}
	m = put(t, kv, value("k", "mine-2"), m, vaultkv.Replace, vaultkv.Updated)
	if got, ver := current(t, v, "secret/data/c/app"); got["k"] != "mine-2" || ver != 3 || m.Version != 3 {
		t.Errorf("Replace: %q version %d (mark %d), want mine-2 at 3", got, ver, m.Version)
	}
	// A deleted current version: nothing to lose, written again.
	if _, err := v.Client.Logical().DeleteWithContext(t.Context(), "secret/data/c/app"); err != nil {
		t.Fatal(err)
	}
	put(t, kv, value("k", "mine-2"), m, vaultkv.OwnedOnly, vaultkv.Created)
}

// testV2Adopt: a path already holding the value (as mirrors wrote it, or
// plain) is adopted without a write; after a restart (mark without
// digest), one read of keymount's version confirms it.
func testV2Adopt(t *testing.T, v *vaultenv.Vault) {
	v.PutKVv2(t, "a/app", map[string]any{"k": "dmFsdWU="}) // "value", base64 as mirrors writes it
	kv := vaultkv.KV{Client: v.Client, Path: "secret/data/a/app", Version: 2}
	writes := v.Audit(t).Count("update", "secret/data/a/app")
	m := put(t, kv, value("k", "value"), vaultkv.Mark{}, vaultkv.OwnedOnly, vaultkv.Adopted)
	if m.Version != 1 || v.Audit(t).Count("update", "secret/data/a/app") != writes {
		t.Fatalf("adopted: mark %d, writes %d→%d; want version 1 and no write", m.Version, writes, v.Audit(t).Count("update", "secret/data/a/app"))
	}
	restarted := vaultkv.Mark{Version: m.Version}
	reads := v.Audit(t).Count("read", "secret/data/a/app")
	put(t, kv, value("k", "value"), restarted, vaultkv.OwnedOnly, vaultkv.Unchanged)
	if got := v.Audit(t).Count("read", "secret/data/a/app"); got != reads+1 {
		t.Errorf("after a restart: %d reads of the value, want %d (one)", got, reads+1)
	}
	// Keymount's own version, the source changed while it was down: written.
	put(t, kv, value("k", "value-2"), restarted, vaultkv.OwnedOnly, vaultkv.Updated)
}

// testV2Race: two writers holding the same mark push different values at
// once: exactly one is written, the other is a conflict, and the value
// in Vault is the winner's.
func testV2Race(t *testing.T, v *vaultenv.Vault) {
	kv := vaultkv.KV{Client: v.Client, Path: "secret/data/r/app", Version: 2}
	m := put(t, kv, value("k", "base"), vaultkv.Mark{}, vaultkv.OwnedOnly, vaultkv.Created)
	for round := range 5 {
		var wg sync.WaitGroup
		results := make([]error, 2)
		vals := []string{"a", "b"}
		marks := make([]vaultkv.Mark, 2)
		for i := range 2 {
			wg.Go(func() {
				marks[i], _, results[i] = kv.Put(context.Background(), value("k", vals[i]+string(rune('0'+round))), m, vaultkv.OwnedOnly)
			})
		}
		wg.Wait()
		won := -1
		for i, err := range results {
			switch {
			case err == nil && won == -1:
				won = i
			case err == nil:
				t.Fatalf("round %d: both writers wrote", round)
			case !errors.Is(err, vaultkv.ErrConflict):
				t.Fatalf("round %d: writer %d: %v, want a conflict", round, i, err)
			}
		}
		if won == -1 {
			t.Fatalf("round %d: no writer wrote: %v", round, results)
		}
		if got, _ := current(t, v, kv.Path); got["k"] != vals[won]+string(rune('0'+round)) {
			t.Fatalf("round %d: Vault holds %q, want the winner's %s", round, got["k"], vals[won])
		}
		m = marks[won]
	}
}

// testV2IfNotExists: written where nothing is, never again after.
func testV2IfNotExists(t *testing.T, v *vaultenv.Vault) {
	kv := vaultkv.KV{Client: v.Client, Path: "secret/data/i/app", Version: 2}
	m := put(t, kv, value("k", "first"), vaultkv.Mark{}, vaultkv.IfNotExists, vaultkv.Created)
	put(t, kv, value("k", "second"), m, vaultkv.IfNotExists, vaultkv.Skipped)
	if got, _ := current(t, v, kv.Path); got["k"] != "first" {
		t.Errorf("IfNotExists replaced the value: %q", got["k"])
	}
}

// testV2Type: a TLS Secret's type goes into custom_metadata, once; other
// custom_metadata keys stay; back to Opaque removes it.
func testV2Type(t *testing.T, v *vaultenv.Vault) {
	kv := vaultkv.KV{Client: v.Client, Path: "secret/data/t/tls", Version: 2}
	tls := value("tls.crt", "C", "tls.key", "K")
	tls.Type = corev1.SecretTypeTLS
	m := put(t, kv, tls, vaultkv.Mark{}, vaultkv.OwnedOnly, vaultkv.Created)
	custom := func() map[string]any {
		s, err := v.Client.Logical().ReadWithContext(t.Context(), "secret/metadata/t/tls")
		if err != nil || s == nil {
			t.Fatalf("metadata: %v", err)
		}
		c, _ := s.Data["custom_metadata"].(map[string]any)
		return c
	}
	if got := vaultkv.TypeOf(custom()); got != corev1.SecretTypeTLS {
		t.Fatalf("custom_metadata type %q, want kubernetes.io/tls", got)
	}
	v.Write(t, "secret/metadata/t/tls", map[string]any{"custom_metadata": map[string]any{vaultkv.MetadataSecretType: "kubernetes.io/tls", "owner": "team-a"}})
	metaWrites := v.Audit(t).Count("update", "secret/metadata/t/tls")
	m = put(t, kv, tls, m, vaultkv.OwnedOnly, vaultkv.Unchanged)
	if got := v.Audit(t).Count("update", "secret/metadata/t/tls"); got != metaWrites {
		t.Errorf("an unchanged type wrote the metadata (%d writes, want %d)", got, metaWrites)
	}
	put(t, kv, value("tls.crt", "C", "tls.key", "K"), m, vaultkv.OwnedOnly, vaultkv.Unchanged)
	if c := custom(); vaultkv.TypeOf(c) != corev1.SecretTypeOpaque || c["owner"] != "team-a" {
		t.Errorf("custom_metadata %v: want the type gone, owner kept", c)
	}
}

// testV1: KV version 1 written as mirrors writes it ({"data": {k: base64}});
// unchanged costs one read; a value someone else wrote is not replaced.
func testV1(t *testing.T, v *vaultenv.Vault) {
	path := vaultenv.KVv1Mount + "/app"
	kv := vaultkv.KV{Client: v.Client, Path: path, Version: 1}
	m := put(t, kv, value("k", "one"), vaultkv.Mark{}, vaultkv.OwnedOnly, vaultkv.Created)
	s, err := v.Client.Logical().ReadWithContext(t.Context(), path)
	if err != nil || s == nil {
		t.Fatal(err)
	}
	if inner, ok := s.Data["data"].(map[string]any); !ok || inner["k"] != "b25l" {
		t.Fatalf("KV v1 holds %v, want data.k = base64 of one, as mirrors writes it", s.Data)
	}
	writes := v.Audit(t).Count("update", path)
	m = put(t, kv, value("k", "one"), m, vaultkv.OwnedOnly, vaultkv.Unchanged)
	m = put(t, kv, value("k", "two"), m, vaultkv.OwnedOnly, vaultkv.Updated)
	if got := v.Audit(t).Count("update", path); got != writes+1 {
		t.Errorf("%d writes, want %d", got, writes+1)
	}
	v.Write(t, path, map[string]any{"k": "theirs"})
	if _, _, err := kv.Put(t.Context(), value("k", "three"), m, vaultkv.OwnedOnly); !errors.Is(err, vaultkv.ErrConflict) {
		t.Errorf("v1 over someone else's value: %v, want ErrConflict", err)
	}
	s, _ = v.Client.Logical().ReadWithContext(t.Context(), path)
	if s == nil || s.Data["k"] != "theirs" {
		t.Errorf("their value was replaced: %v", s)
	}

}
