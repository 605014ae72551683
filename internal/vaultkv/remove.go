package vaultkv

import (
	"context"
	"fmt"
)

// RemoveFields removes what c wrote at kv.Path (a PushSecret's
// deletionPolicy Delete): every field when a step names none, else the
// fields the steps name. Nothing there is nothing to do.
//
// KV version 2: only while the current version is last, the one keymount
// wrote; another is ErrConflict and nothing is removed. The whole secret
// goes with a DELETE of its data path, a soft delete of the current
// version (recoverable with undelete, its metadata and older versions
// kept); fields go with a check-and-set write against last, and the secret
// as a whole when no field remains. The version is checked before the
// DELETE, which Vault cannot make conditional.
//
// KV version 1 keeps no versions: the value is removed only while it is
// what c would write, as PutFields adopts one.
func (kv KV) RemoveFields(ctx context.Context, c Change, last int) error {
	if kv.Version == 2 {
		return kv.removeV2(ctx, c, last)
	}
	return kv.removeV1(ctx, c)
}

func (kv KV) removeV2(ctx context.Context, c Change, last int) error {
	mp, ok := MetadataPath(kv.Path)
	if !ok {
		return fmt.Errorf("%s names no data segment: a KV version 2 path is <mount>/data/<name>", kv.Path)
	}
	st, err := kv.metadata(ctx, mp)
	switch {
	case err != nil:
		return err
	case st.current == 0 || st.gone:
		return nil
	case st.current != last:
		return fmt.Errorf("%s is at version %d, %w (%s): not removed",
			kv.Path, st.current, ErrConflict, wroteWhat(Mark{Version: last}))
	}
	rest := map[string]any{}
	if !c.whole() {
		there, err := kv.fieldsV2(ctx, last)
		if err != nil {
			return err
		}
		rest = c.removeFrom(there)
	}
	if len(rest) == 0 {
		if _, err := kv.Client.Logical().DeleteWithContext(ctx, kv.Path); err != nil {
			return vaultErr("delete", kv.Path, err)
		}
		return nil
	}
	_, err = kv.writeFieldsV2(ctx, rest, last)
	return err
}

func (kv KV) removeV1(ctx context.Context, c Change) error {
	there, err := kv.fieldsV1(ctx)
	switch {
	case err != nil:
		return err
	case there == nil:
		return nil
	case !sameFields(c.apply(there), there):
		return fmt.Errorf("%s (KV version 1, which keeps no versions) holds another value than keymount's, %w: not removed", kv.Path, ErrConflict)
	}
	rest := c.removeFrom(there)
	if len(rest) == 0 {
		if _, err := kv.Client.Logical().DeleteWithContext(ctx, kv.Path); err != nil {
			return vaultErr("delete", kv.Path, err)
		}
		return nil
	}
	if _, err := kv.Client.Logical().WriteWithContext(ctx, kv.Path, rest); err != nil {
		return vaultErr("write", kv.Path, err)
	}
	return nil
}
