package vaultkv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
)

// MetadataPushedBy is the KV version 2 custom_metadata key naming who
// pushed a secret field by field: the "<namespace>/<name>" of the
// PushSecret. Every PutFields write sets it.
const MetadataPushedBy = "keymount.io/pushed-by"

// The External Secrets Operator's mark of the KV version 2 secrets its
// PushSecrets wrote: custom_metadata managed-by = external-secrets.
const (
	esoManagedBy = "managed-by"
	esoManager   = "external-secrets"
)

// Step is one change to a secret's fields, in the External Secrets
// Operator's format (JSON values as they are, not mirrors' base64): with
// Field "", Object replaces every field; else Field is set to the string
// Value, the other fields kept.
type Step struct {
	Field  string
	Object map[string]any
	Value  string
}

// Change is the steps of one write, applied in order.
type Change []Step

// apply is the fields cur (nil: none) become.
func (c Change) apply(cur map[string]any) map[string]any {
	out := map[string]any{}
	maps.Copy(out, cur)
	for _, s := range c {
		if s.Field == "" {
			out = map[string]any{}
			maps.Copy(out, s.Object)
			continue
		}
		out[s.Field] = s.Value
	}
	return out
}

// whole tells whether c replaces every field: the current ones need not
// be read to apply it.
func (c Change) whole() bool { return len(c) > 0 && c[0].Field == "" }

// removeFrom is cur without what c names: nothing left when a step names
// no field.
func (c Change) removeFrom(cur map[string]any) map[string]any {
	out := map[string]any{}
	maps.Copy(out, cur)
	for _, s := range c {
		if s.Field == "" {
			return map[string]any{}
		}
		delete(out, s.Field)
	}
	return out
}

// sameFields tells whether a and b are the same JSON object.
func sameFields(a, b map[string]any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// FieldsPut is one PutFields write.
type FieldsPut struct {
	Change Change
	// Last is the KV version 2 version keymount last wrote at the path, 0
	// for none.
	Last int
	// Unchanged: Change is what keymount wrote at Last. The current
	// version still being Last then costs one metadata read, nothing else.
	Unchanged bool
	// Policy: OwnedOnly also replaces, with Last 0, a value whose
	// custom_metadata marks Owner or the External Secrets Operator as its
	// pusher (a migrated PushSecret's).
	Policy Policy
	// Owner is recorded as MetadataPushedBy.
	Owner string
}

// PutFields applies p.Change to the fields at kv.Path (the External
// Secrets Operator's format) under p.Policy and returns the version
// keymount's value has there now (0 on KV version 1, or when skipped).
// A value keymount did not write is a conflict (ErrConflict), never
// replaced, unless p.Policy is Replace; a KV version 2 write is a
// check-and-set against the version the change was applied to.
func (kv KV) PutFields(ctx context.Context, p FieldsPut) (int, Result, error) {
	if kv.Version == 2 {
		return kv.putFieldsV2(ctx, p)
	}
	return kv.putFieldsV1(ctx, p)
}

func (kv KV) putFieldsV2(ctx context.Context, p FieldsPut) (int, Result, error) {
	mp, ok := MetadataPath(kv.Path)
	if !ok {
		return 0, Unchanged, fmt.Errorf("%s names no data segment: a KV version 2 path is <mount>/data/<name>", kv.Path)
	}
	st, err := kv.metadata(ctx, mp)
	if err != nil {
		return 0, Unchanged, err
	}
	res, cur, err := kv.decideV2(ctx, p, st)
	if err != nil {
		return 0, Unchanged, err
	}
	if res == Skipped {
		return p.Last, Skipped, nil
	}
	version := st.current
	if res.Wrote() {
		if cur == nil && !st.gone && st.current != 0 && !p.Change.whole() {
			// The fields kept are those of the version written against.
			if cur, err = kv.fieldsV2(ctx, st.current); err != nil {
				return 0, Unchanged, err
			}
		}
		if version, err = kv.writeFieldsV2(ctx, p.Change.apply(cur), st.current); err != nil {
			return 0, Unchanged, err
		}
	}
	return version, res, kv.markPusher(ctx, mp, st, p.Owner)
}

// decideV2 is what a KV version 2 put does given the path's metadata st:
// the check-and-set of a write is against st.current, which is p.Last when
// the value is keymount's. It returns the current fields when it read
// them.
func (kv KV) decideV2(ctx context.Context, p FieldsPut, st state) (Result, map[string]any, error) {
	switch {
	case st.current == 0 || st.gone:
		return Created, nil, nil
	case p.Policy == IfNotExists:
		return Skipped, nil, nil
	case st.current == p.Last && p.Unchanged:
		return Unchanged, nil, nil
	case st.current == p.Last:
		return Updated, nil, nil
	}
	there, err := kv.fieldsV2(ctx, st.current)
	switch {
	case err != nil:
		return Unchanged, nil, err
	case sameFields(p.Change.apply(there), there):
		return Adopted, there, nil
	case p.Policy == Replace || (p.Policy == OwnedOnly && p.Last == 0 && pushedBy(st.custom, p.Owner)):
		return Updated, there, nil
	}
	return Unchanged, nil, fmt.Errorf("%s is at version %d, %w (%s): not replaced",
		kv.Path, st.current, ErrConflict, wroteWhat(Mark{Version: p.Last}))
}

// pushedBy tells whether custom marks owner, or the External Secrets
// Operator, as the secret's pusher.
func pushedBy(custom map[string]any, owner string) bool {
	by, _ := custom[MetadataPushedBy].(string)
	eso, _ := custom[esoManagedBy].(string)
	return (owner != "" && by == owner) || eso == esoManager
}

// fieldsV2 reads the fields of version of kv.Path as they are: nil for
// none (or a deleted version).
func (kv KV) fieldsV2(ctx context.Context, version int) (map[string]any, error) {
	s, err := kv.Client.Logical().ReadWithDataWithContext(ctx, kv.Path, map[string][]string{"version": {strconv.Itoa(version)}})
	if err != nil {
		return nil, vaultErr("read", kv.Path, err)
	}
	if s == nil {
		return nil, nil
	}
	fields, _ := s.Data["data"].(map[string]any)
	return fields, nil
}

// writeFieldsV2 writes fields with a check-and-set against cas and returns
// the version written; a failed check-and-set is ErrConflict.
func (kv KV) writeFieldsV2(ctx context.Context, fields map[string]any, cas int) (int, error) {
	s, err := kv.Client.Logical().WriteWithContext(ctx, kv.Path, map[string]any{
		"data":    fields,
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

// markPusher records owner as MetadataPushedBy in the path's
// custom_metadata when it is not there already (one metadata write, the
// other keys kept).
func (kv KV) markPusher(ctx context.Context, mp string, st state, owner string) error {
	if have, _ := st.custom[MetadataPushedBy].(string); owner == "" || have == owner {
		return nil
	}
	custom := map[string]any{}
	maps.Copy(custom, st.custom)
	custom[MetadataPushedBy] = owner
	if _, err := kv.Client.Logical().WriteWithContext(ctx, mp, map[string]any{"custom_metadata": custom}); err != nil {
		return fmt.Errorf("the value is written, but its pusher is not recorded (the token needs update on %s): %w", mp, vaultErr("write", mp, err))
	}
	return nil
}

// putFieldsV1: KV version 1 keeps no versions and has no check-and-set: a
// value there is replaced only when it already is what keymount would
// write (adopted), or under Replace.
func (kv KV) putFieldsV1(ctx context.Context, p FieldsPut) (int, Result, error) {
	there, err := kv.fieldsV1(ctx)
	if err != nil {
		return 0, Unchanged, err
	}
	want := p.Change.apply(there)
	res := Created
	if there != nil {
		switch {
		case p.Policy == IfNotExists:
			return 0, Skipped, nil
		case sameFields(want, there) && p.Unchanged:
			return 0, Unchanged, nil
		case sameFields(want, there):
			return 0, Adopted, nil
		case p.Policy == Replace:
			res = Updated
		default:
			return 0, Unchanged, fmt.Errorf("%s (KV version 1, which keeps no versions) holds another value, %w: not replaced", kv.Path, ErrConflict)
		}
	}
	if _, err := kv.Client.Logical().WriteWithContext(ctx, kv.Path, want); err != nil {
		return 0, Unchanged, vaultErr("write", kv.Path, err)
	}
	return 0, res, nil
}

func (kv KV) fieldsV1(ctx context.Context) (map[string]any, error) {
	s, err := kv.Client.Logical().ReadWithContext(ctx, kv.Path)
	if err != nil {
		return nil, vaultErr("read", kv.Path, err)
	}
	if s == nil {
		return nil, nil
	}
	if s.Data == nil {
		return map[string]any{}, nil
	}
	return s.Data, nil
}
