//go:build integration && vault

package vault_test

import (
	"strings"
	"testing"

	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/server"
)

func (r *pushRig) testRemoveMatching(t *testing.T) {
	expect(t, r.push(t, r.p, item("gone", `{"k":"v"}`, "", replace))[0], keymountv1.Outcome_OUTCOME_CREATED, "1")
	expect(t, r.remove(t, item("gone", "", "1", replace))[0], keymountv1.Outcome_OUTCOME_REMOVED, "")
	fields, version, _ := r.kv(t, "gone")
	if fields != nil || version != 1 {
		t.Fatalf("after removal: %v at version %d, want version 1 deleted", fields, version)
	}
	// Soft-deleted: recoverable.
	r.vault.Write(t, "secret/undelete/gone", map[string]any{"versions": []int{1}})
	r.fieldsAre(t, "gone", map[string]string{"k": "v"})
	r.vault.Write(t, "secret/delete/gone", map[string]any{"versions": []int{1}})
	// Nothing there is nothing to do.
	expect(t, r.remove(t, item("gone", "", "1", replace))[0], keymountv1.Outcome_OUTCOME_REMOVED, "")
	expect(t, r.remove(t, item("never-there", "", "", replace))[0], keymountv1.Outcome_OUTCOME_REMOVED, "")
}

func (r *pushRig) testRemoveMismatching(t *testing.T) {
	expect(t, r.push(t, r.p, item("kept", `{"k":"mine"}`, "", replace))[0], keymountv1.Outcome_OUTCOME_CREATED, "1")
	r.vault.PutKVv2(t, "kept", map[string]any{"k": "theirs"})
	res := r.remove(t, item("kept", "", "1", replace))[0]
	expect(t, res, keymountv1.Outcome_OUTCOME_CONFLICT, "")
	if !strings.Contains(res.Message, "secret/data/kept") || !strings.Contains(res.Message, "version 2") {
		t.Errorf("conflict message %q: want the path and the current version", res.Message)
	}
	r.fieldsAre(t, "kept", map[string]string{"k": "theirs"})
}

func (r *pushRig) testRemoveProperty(t *testing.T) {
	r.vault.PutKVv2(t, "fields", map[string]any{"other": "keep"})
	token := server.PushItem{RemoteKey: "secret/data/fields", Property: "token", Value: []byte("t"), Policy: overwrite, Owner: owner}
	expect(t, r.push(t, r.p, token)[0], keymountv1.Outcome_OUTCOME_UPDATED, "2")
	token.LastVersion = "2"
	expect(t, r.remove(t, token)[0], keymountv1.Outcome_OUTCOME_REMOVED, "")
	if v := r.fieldsAre(t, "fields", map[string]string{"other": "keep"}); v != 3 {
		t.Errorf("removing a field: version %d, want 3 (one check-and-set write)", v)
	}
	// The last field: the secret goes.
	other := server.PushItem{RemoteKey: "secret/data/fields", Property: "other", LastVersion: "3", Owner: owner}
	expect(t, r.remove(t, other)[0], keymountv1.Outcome_OUTCOME_REMOVED, "")
	if fields, _, _ := r.kv(t, "fields"); fields != nil {
		t.Errorf("after removing the last field: %v, want the secret deleted", fields)
	}
}

// testKVv1: no versions, no check-and-set: a value is replaced only when
// it already is keymount's, or with OVERWRITE.
func (r *pushRig) testKVv1(t *testing.T) {
	v1 := func(value string, policy keymountv1.UpdatePolicy) server.PushItem {
		return server.PushItem{RemoteKey: "kv1/pushed", Value: []byte(value), Policy: policy, Owner: owner}
	}
	read := func() map[string]any {
		s, err := r.vault.Client.Logical().ReadWithContext(t.Context(), "kv1/pushed")
		if err != nil {
			t.Fatal(err)
		}
		if s == nil {
			return nil
		}
		return s.Data
	}
	expect(t, r.push(t, r.p, v1(`{"k":"v"}`, replace))[0], keymountv1.Outcome_OUTCOME_CREATED, "")
	if got := read(); got["k"] != "v" || len(got) != 1 {
		t.Fatalf("kv1/pushed = %v, want {k: v}", got)
	}
	unchanged := v1(`{"k":"v"}`, replace)
	unchanged.Unchanged = true
	expect(t, r.push(t, r.p, unchanged)[0], keymountv1.Outcome_OUTCOME_UNCHANGED, "")
	expect(t, r.push(t, r.p, v1(`{"k":"v"}`, replace))[0], keymountv1.Outcome_OUTCOME_ADOPTED, "")
	res := r.push(t, r.p, v1(`{"k":"v2"}`, replace))[0]
	expect(t, res, keymountv1.Outcome_OUTCOME_CONFLICT, "")
	if !strings.Contains(res.Message, "kv1/pushed") {
		t.Errorf("conflict message %q does not name the path", res.Message)
	}
	expect(t, r.push(t, r.p, v1(`{"k":"v2"}`, overwrite))[0], keymountv1.Outcome_OUTCOME_UPDATED, "")
	if got := read(); got["k"] != "v2" {
		t.Fatalf("kv1/pushed = %v after OVERWRITE, want {k: v2}", got)
	}
	expect(t, r.push(t, r.p, v1(`{"k":"v3"}`, ifNotExists))[0], keymountv1.Outcome_OUTCOME_SKIPPED, "")

	expect(t, r.remove(t, v1(`{"k":"other"}`, replace))[0], keymountv1.Outcome_OUTCOME_CONFLICT, "")
	expect(t, r.remove(t, v1(`{"k":"v2"}`, replace))[0], keymountv1.Outcome_OUTCOME_REMOVED, "")
	if got := read(); got != nil {
		t.Fatalf("kv1/pushed = %v after removal, want nothing", got)
	}
}
