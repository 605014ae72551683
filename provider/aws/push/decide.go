package push

import (
	"context"
	"errors"
	"fmt"

	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/server"
)

// remote is one object in its store. Errors name the AWS call and AWS's
// error code, never a value.
type remote interface {
	// head returns the object's current version, "" when there is none
	// (errDeleting when a secret is scheduled for deletion).
	head(ctx context.Context) (string, error)
	// read returns the current value and its version (nil and "" when
	// there is none).
	read(ctx context.Context) (*content, string, error)
	// marked reports whether the object carries a pusher's mark: OwnerTag
	// naming owner, or the External Secrets Operator's.
	marked(ctx context.Context, owner string) (bool, error)
	// create writes a new object tagged with owner and returns its
	// version; errExists when there is one already.
	create(ctx context.Context, c content, owner string) (string, error)
	// replace writes c as the new current value unless the current
	// version is no longer against (errMoved), where the store can tell,
	// and returns the new version.
	replace(ctx context.Context, c content, against string) (string, error)
	// remove deletes the object; one that is gone already is no error.
	remove(ctx context.Context) error
	// rejected reports whether AWS refused the credentials of a call.
	rejected() bool
}

var (
	errExists   = errors.New("exists already")
	errMoved    = errors.New("another writer changed it after its version was checked")
	errDeleting = errors.New("is scheduled for deletion: restore it (RestoreSecret) or wait until it is deleted")
)

// pushObject writes the items' value into the object: see the package doc.
func pushObject(ctx context.Context, r remote, o *object) server.PushResult {
	last := o.lastVersion()
	cur, err := r.head(ctx)
	if err != nil {
		return failed(last, "%s: %v", o.where(), err)
	}
	if cur == "" {
		want, _, err := apply(nil, o.items)
		if err != nil {
			return failed(last, "%s: %v", o.where(), err)
		}
		v, err := r.create(ctx, want, o.items[0].Owner)
		if err == nil {
			return result(keymountv1.Outcome_OUTCOME_CREATED, v)
		}
		if !errors.Is(err, errExists) {
			return failed(last, "%s: %v", o.where(), err)
		}
		// Another writer created it first: judge it as an existing one.
		if cur, err = r.head(ctx); err != nil {
			return failed(last, "%s: %v", o.where(), err)
		}
		if cur == "" {
			return failed(last, "%s: creating it failed because it exists, yet it has no current version", o.where())
		}
	}
	if o.policy() == keymountv1.UpdatePolicy_UPDATE_POLICY_IF_NOT_EXISTS {
		return result(keymountv1.Outcome_OUTCOME_SKIPPED, last)
	}
	if cur == last && o.unchanged() {
		return result(keymountv1.Outcome_OUTCOME_UNCHANGED, cur)
	}
	return pushExisting(ctx, r, o, cur, last)
}

// pushExisting writes into an object whose current version is cur: with a
// conditional write when keymount wrote cur; else it adopts an identical
// value, replaces one it may replace, and reports any other as a conflict.
func pushExisting(ctx context.Context, r remote, o *object, cur, last string) server.PushResult {
	var there *content
	if cur != last || o.items[0].Property != "" {
		var err error
		if there, cur, err = r.read(ctx); err != nil {
			return failed(last, "%s: %v", o.where(), err)
		}
		if cur == "" {
			return failed(last, "%s: deleted while keymount pushed: it is created at the next push", o.where())
		}
	}
	want, same, err := apply(there, o.items)
	if err != nil {
		return failed(last, "%s: %v", o.where(), err)
	}
	switch {
	case same && cur == last:
		return result(keymountv1.Outcome_OUTCOME_UNCHANGED, cur)
	case same:
		return result(keymountv1.Outcome_OUTCOME_ADOPTED, cur)
	case cur != last:
		ok, err := mayReplace(ctx, r, o, last)
		if err != nil {
			return failed(last, "%s: %v", o.where(), err)
		}
		if !ok {
			return conflict(last, "%s is at version %s, which keymount did not write (%s): not replaced", o.where(), cur, wroteWhat(last))
		}
	}
	v, err := r.replace(ctx, want, cur)
	if errors.Is(err, errMoved) {
		return conflict(last, "%s: %v (version %s was checked; %s): not replaced", o.where(), err, cur, wroteWhat(last))
	}
	if err != nil {
		return failed(last, "%s: %v", o.where(), err)
	}
	return result(keymountv1.Outcome_OUTCOME_UPDATED, v)
}

// mayReplace reports whether the items may replace a version keymount
// did not write: OVERWRITE always; REPLACE when keymount has written none
// and the object carries a pusher's mark (a migrated PushSecret's).
func mayReplace(ctx context.Context, r remote, o *object, last string) (bool, error) {
	switch o.policy() {
	case keymountv1.UpdatePolicy_UPDATE_POLICY_OVERWRITE:
		return true, nil
	case keymountv1.UpdatePolicy_UPDATE_POLICY_REPLACE:
		if last != "" {
			return false, nil
		}
		return r.marked(ctx, o.items[0].Owner)
	default:
		return false, nil
	}
}

// removeObject deletes the object, or the items' properties of it, when
// its current version is still the one keymount wrote.
func removeObject(ctx context.Context, r remote, o *object) server.PushResult {
	last := o.lastVersion()
	cur, err := r.head(ctx)
	switch {
	case errors.Is(err, errDeleting):
		return result(keymountv1.Outcome_OUTCOME_REMOVED, "")
	case err != nil:
		return failed(last, "%s: %v", o.where(), err)
	case cur == "":
		return result(keymountv1.Outcome_OUTCOME_REMOVED, "")
	case cur != last:
		return conflict(last, "%s is at version %s, not the one keymount wrote (%s): not removed", o.where(), cur, wroteWhat(last))
	}
	if o.items[0].Property == "" {
		if err := r.remove(ctx); err != nil {
			return failed(last, "%s: %v", o.where(), err)
		}
		return result(keymountv1.Outcome_OUTCOME_REMOVED, "")
	}
	return removeProperties(ctx, r, o, last)
}

// removeProperties removes the items' keys from the object's JSON value
// with a conditional write, and deletes the object when no key remains.
func removeProperties(ctx context.Context, r remote, o *object, last string) server.PushResult {
	there, cur, err := r.read(ctx)
	switch {
	case err != nil:
		return failed(last, "%s: %v", o.where(), err)
	case cur == "":
		return result(keymountv1.Outcome_OUTCOME_REMOVED, "")
	case cur != last:
		return conflict(last, "%s is at version %s, not the one keymount wrote (%s): not removed", o.where(), cur, wroteWhat(last))
	}
	rest, empty, err := without(there, o.items)
	if err != nil {
		return failed(last, "%s: %v", o.where(), err)
	}
	if empty {
		err = r.remove(ctx)
	} else {
		_, err = r.replace(ctx, rest, cur)
	}
	if errors.Is(err, errMoved) {
		return conflict(last, "%s: %v (version %s was checked): not removed", o.where(), err, cur)
	}
	if err != nil {
		return failed(last, "%s: %v", o.where(), err)
	}
	return result(keymountv1.Outcome_OUTCOME_REMOVED, "")
}

// wroteWhat says which version keymount wrote last, for a conflict.
func wroteWhat(last string) string {
	if last == "" {
		return "keymount has written none"
	}
	return fmt.Sprintf("keymount wrote version %s", last)
}
