package aws_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// TestRemove: a secret still at the version keymount wrote is deleted
// (scheduled, with the default recovery window); one someone else wrote
// over is kept and reported as a conflict; a missing one is removed
// already.
func TestRemove(t *testing.T) {
	e := newPushEnv(t)
	mine := e.push(t, item("app/mine", "v"))[0].Version
	theirs := e.push(t, item("app/theirs", "v"))[0].Version
	later := e.putTheirs(t, "app/theirs", "their-value")

	res := e.remove(t, item("app/mine", "", last(mine)), item("app/theirs", "", last(theirs)), item("app/missing", "", last("x")))
	want(t, "matching", res[0], removed)
	want(t, "mismatching", res[1], conflicts, `"app/theirs"`, later, theirs)
	want(t, "missing", res[2], removed)

	out, err := e.sm.DescribeSecret(t.Context(), &secretsmanager.DescribeSecretInput{SecretId: strp("app/mine")})
	if err != nil || out.DeletedDate == nil {
		t.Errorf("app/mine not scheduled for deletion: %v", err)
	}
	if value, v := e.current(t, "app/theirs"); value != "their-value" || v != later {
		t.Errorf("app/theirs changed: %q at %s", value, v)
	}
	// Pushing over a secret scheduled for deletion fails, naming it.
	want(t, "push over deleted", e.push(t, item("app/mine", "v"))[0], failedOut, `"app/mine"`, "scheduled for deletion")
}

// TestRemoveProperty: removing a property keeps the other keys (a
// conditional write); removing the last one deletes the secret.
func TestRemoveProperty(t *testing.T) {
	e := newPushEnv(t)
	v := e.push(t, item("app/db", "u", property("user")), item("app/db", "p", property("password")))[0].Version
	res := e.remove(t, item("app/db", "", property("password"), last(v)))
	want(t, "one property", res[0], removed)
	value, now := e.current(t, "app/db")
	if value != `{"user":"u"}` {
		t.Fatalf("after removing password: %s", value)
	}
	res = e.remove(t, item("app/db", "", property("user"), last(v)))
	want(t, "stale version", res[0], conflicts, now)

	res = e.remove(t, item("app/db", "", property("user"), last(now)))
	want(t, "last property", res[0], removed)
	out, err := e.sm.DescribeSecret(t.Context(), &secretsmanager.DescribeSecretInput{SecretId: strp("app/db")})
	if err != nil || out.DeletedDate == nil {
		t.Errorf("app/db not scheduled for deletion after its last property: %v", err)
	}
}

func strp(s string) *string { return &s }
