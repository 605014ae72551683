package aws_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/internal/satoken/satokentest"
	"github.com/keymount/keymount/provider/aws/identity"
	"github.com/keymount/keymount/provider/aws/push"
	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/server"
)

// TestPushCreatesThenUnchangedThenUpdates: a missing secret is created,
// tagged with its owner, with the identity of the PushSecret's
// ServiceAccount; the same value at the same version is confirmed with
// one DescribeSecret and no write; a new value is written conditionally
// and becomes AWSCURRENT.
func TestPushCreatesThenUnchangedThenUpdates(t *testing.T) {
	e := newPushEnv(t)
	res := e.push(t, item("app/db", "pw-1"))
	want(t, "create", res[0], created)
	value, version := e.current(t, "app/db")
	if value != "pw-1" || res[0].Version != version {
		t.Fatalf("after create: %q at %s, result version %s", value, version, res[0].Version)
	}
	if got := e.tags(t, "app/db")[push.OwnerTag]; got != owner {
		t.Errorf("tag %s = %q, want %q", push.OwnerTag, got, owner)
	}
	if diff := cmp.Diff([]string{"shop/pusher@" + region}, e.ids.asked); diff != "" {
		t.Errorf("identities asked (-want +got):\n%s", diff)
	}

	e.calls.counts()
	res = e.push(t, item("app/db", "pw-1", last(version), same))
	want(t, "unchanged", res[0], unchanged)
	if res[0].Version != version {
		t.Errorf("unchanged version %s, want %s", res[0].Version, version)
	}
	if diff := cmp.Diff(map[string]int{"DescribeSecret": 1}, e.calls.counts()); diff != "" {
		t.Errorf("calls of an unchanged push (-want +got):\n%s", diff)
	}

	res = e.push(t, item("app/db", "pw-2", last(version)))
	want(t, "update", res[0], updated)
	value, now := e.current(t, "app/db")
	if value != "pw-2" || now != res[0].Version || now == version {
		t.Errorf("after update: %q at %s, result version %s (was %s)", value, now, res[0].Version, version)
	}
}

// TestPushPropertyKeepsOtherKeys: a property is one key of the secret's
// JSON object; the other keys stay, and a value that is not a JSON object
// fails naming the remote key.
func TestPushPropertyKeepsOtherKeys(t *testing.T) {
	e := newPushEnv(t)
	res := e.push(t, item("app/db", `{"username":"app","password":"old"}`))
	want(t, "create", res[0], created)
	res = e.push(t, item("app/db", "new", property("password"), last(res[0].Version)))
	want(t, "property", res[0], updated)
	value, _ := e.current(t, "app/db")
	var got map[string]string
	if err := json.Unmarshal([]byte(value), &got); err != nil {
		t.Fatalf("value is not a JSON object: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"username": "app", "password": "new"}, got); diff != "" {
		t.Errorf("value (-want +got):\n%s", diff)
	}

	// Two properties of a missing secret: one object, one write.
	e.calls.counts()
	res = e.push(t, item("app/api", "u", property("user")), item("app/api", "k", property("key")))
	want(t, "new properties [0]", res[0], created)
	want(t, "new properties [1]", res[1], created)
	if n := e.calls.counts()["CreateSecret"]; n != 1 {
		t.Errorf("%d CreateSecret calls for one object, want 1", n)
	}
	if value, _ := e.current(t, "app/api"); value != `{"key":"k","user":"u"}` {
		t.Errorf("app/api = %s", value)
	}

	plain := e.theirs(t, "app/plain", "not json", "managed-by", "external-secrets")
	res = e.push(t, item("app/plain", "x", property("password")))
	want(t, "not an object", res[0], failedOut, `"app/plain"`, "not a JSON object")
	if value, v := e.current(t, "app/plain"); value != "not json" || v != plain {
		t.Errorf("app/plain changed: version %s", v)
	}
}

// TestPushConflicts: a value keymount did not write is not replaced under
// REPLACE; the message names the remote key, the current version and
// keymount's, never a value. OVERWRITE replaces it.
func TestPushConflicts(t *testing.T) {
	e := newPushEnv(t)
	theirs := e.theirs(t, "app/db", "their-value")
	res := e.push(t, item("app/db", "mine"))
	want(t, "someone else's secret", res[0], conflicts, `"app/db"`, theirs, "keymount has written none")
	if strings.Contains(res[0].Message, "their-value") || strings.Contains(res[0].Message, "mine") {
		t.Errorf("message %q holds a value", res[0].Message)
	}
	if value, _ := e.current(t, "app/db"); value != "their-value" {
		t.Fatalf("their value replaced by %q", value)
	}

	// keymount wrote a version, then someone else wrote another.
	mine := e.push(t, item("app/other", "mine-1"))[0].Version
	later := e.putTheirs(t, "app/other", "their-2")
	res = e.push(t, item("app/other", "mine-2", last(mine)))
	want(t, "written over", res[0], conflicts, `"app/other"`, later, "keymount wrote version "+mine)
	if value, _ := e.current(t, "app/other"); value != "their-2" {
		t.Fatalf("their later value replaced by %q", value)
	}

	res = e.push(t, item("app/db", "mine", policy(keymountv1.UpdatePolicy_UPDATE_POLICY_OVERWRITE)))
	want(t, "overwrite", res[0], updated)
	if value, v := e.current(t, "app/db"); value != "mine" || v != res[0].Version {
		t.Errorf("after OVERWRITE: %q at %s, result version %s", value, v, res[0].Version)
	}
}

// TestPushAdopts: REPLACE takes over a secret with a pusher's mark (the
// External Secrets Operator's, or keymount's of the same owner) when
// keymount has written none, and one that already holds the very value
// without writing.
func TestPushAdopts(t *testing.T) {
	e := newPushEnv(t)
	e.theirs(t, "eso/db", "eso-value", "managed-by", "external-secrets")
	e.theirs(t, "mine/db", "old", push.OwnerTag, owner)
	e.theirs(t, "stranger/db", "old", push.OwnerTag, "other/pushsecret")
	identical := e.theirs(t, "same/db", "the-value")

	e.calls.counts()
	res := e.push(t,
		item("eso/db", "new"), item("mine/db", "new"), item("stranger/db", "new"), item("same/db", "the-value"))
	want(t, "ESO's", res[0], updated)
	want(t, "owner's", res[1], updated)
	want(t, "another owner's", res[2], conflicts, `"stranger/db"`)
	want(t, "identical", res[3], adopted)
	if res[3].Version != identical {
		t.Errorf("adopted version %s, want %s", res[3].Version, identical)
	}
	for _, name := range []string{"eso/db", "mine/db"} {
		if value, _ := e.current(t, name); value != "new" {
			t.Errorf("%s = %q, want the pushed value", name, value)
		}
	}
	if calls := e.calls.counts(); calls["PutSecretValue"] != 2 || calls["UpdateSecretVersionStage"] != 2 {
		t.Errorf("calls %v: want two writes (none for the conflict and the adoption)", calls)
	}
}

// TestPushIfNotExists: a value there is skipped, untouched; a missing one
// is created.
func TestPushIfNotExists(t *testing.T) {
	e := newPushEnv(t)
	v := e.theirs(t, "app/db", "theirs")
	ifNotExists := policy(keymountv1.UpdatePolicy_UPDATE_POLICY_IF_NOT_EXISTS)
	res := e.push(t, item("app/db", "mine", ifNotExists), item("app/new", "mine", ifNotExists))
	want(t, "existing", res[0], skipped)
	want(t, "missing", res[1], created)
	if value, now := e.current(t, "app/db"); value != "theirs" || now != v {
		t.Errorf("skipped secret changed to %q at %s", value, now)
	}
}

// TestPushItemsFailAlone: an item of an unknown object type, or an SSM
// parameter with a property, fails naming itself; the others are written.
func TestPushItemsFailAlone(t *testing.T) {
	e := newPushEnv(t)
	res := e.push(t,
		item("app/x", "v", objectType("vault")),
		item("/app/y", "v", objectType(push.TypeSSMParameter), property("p")),
		item("app/ok", "v"))
	want(t, "unknown type", res[0], failedOut, `"app/x"`, `"vault"`)
	want(t, "ssm property", res[1], failedOut, `"/app/y"`, "an SSM parameter holds one value: remove property")
	want(t, "the other", res[2], created)
}

// TestPushIdentityRefused: a push whose token does not prove the
// ServiceAccount the attributes name is refused as a whole, before any
// credentials are asked for or AWS called.
func TestPushIdentityRefused(t *testing.T) {
	e := newPushEnv(t)
	tok := e.iss.Sign(t, satokentest.Token{Audiences: []string{identity.AudienceSTS}, Namespace: "shop", ServiceAccount: "someone-else"})
	e.attrs = withToken(t, e.attrs, identity.AudienceSTS, tok)
	_, err := e.pusher.Push(t.Context(), &server.PushRequest{Attributes: e.attrs, Items: []server.PushItem{item("app/db", "v")}})
	if !errors.Is(err, server.ErrPermissionDenied) {
		t.Fatalf("Push with another account's token: %v, want permission denied", err)
	}
	if len(e.ids.asked) != 0 || len(e.calls.counts()) != 0 {
		t.Errorf("identities asked %v, AWS called: the push went past its proof", e.ids.asked)
	}
}
