//go:build integration && vault

package vault_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/provider/vault"
	"github.com/keymount/keymount/provider/vault/spec"
	"github.com/keymount/keymount/tests/vaultenv"
)

// pusherPolicy is what the docs' "Push" section asks of a pushing role.
const pusherPolicy = `
path "secret/data/*" { capabilities = ["create", "read", "update", "delete"] }
path "secret/metadata/*" { capabilities = ["read", "update"] }
path "kv1/*" { capabilities = ["create", "read", "update", "delete"] }
path "secret/data/forbidden/*" { capabilities = ["deny"] }
`

// owner is the PushSecret the tests push for.
const owner = "pushers/app-secret"

// TestPush runs keymount's push extension against a real Vault, logged in
// with Kubernetes auth as a PushSecret's ServiceAccount.
func TestPush(t *testing.T) {
	r := &pushRig{rig: newRig(t)}
	r.vault.Policy(t, "pusher", pusherPolicy)
	r.identity(t, "pushers", "pusher", vaultenv.Role{Policies: []string{"pusher"}})
	r.p = r.provider(t, vault.Config{})
	t.Run("CreateUnchangedUpdate", r.testCreateUnchangedUpdate)
	t.Run("PropertyMergeKeepsOthersFields", r.testPropertyMerge)
	t.Run("OthersVersionIsAConflict", r.testConflict)
	t.Run("ExternalSecretsMarkedAdopted", r.testESOMarked)
	t.Run("IdenticalAdopted", r.testIdenticalAdopted)
	t.Run("IfNotExists", r.testIfNotExists)
	t.Run("TwoWritersRacing", r.testRace)
	t.Run("FailedItemNeverStopsOthers", r.testFailedItem)
	t.Run("LoginRefused", r.testLoginRefused)
	t.Run("RemoveMatching", r.testRemoveMatching)
	t.Run("RemoveMismatching", r.testRemoveMismatching)
	t.Run("RemoveProperty", r.testRemoveProperty)
	t.Run("KVv1", r.testKVv1)
	t.Run("OverTheSocket", r.testOverTheSocket)
}

type pushRig struct {
	*rig
	p *vault.Provider
}

// attrs are what keymount-controller sends for the PushSecret's identity:
// the class's parameters and a token of its ServiceAccount (bound to no
// pod).
func (r *pushRig) attrs(t *testing.T, role string) map[string]string {
	t.Helper()
	tr, err := r.kube.CoreV1().ServiceAccounts("pushers").CreateToken(t.Context(), "pusher", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	tokens, _ := json.Marshal(map[string]any{"vault": map[string]string{"token": tr.Status.Token, "expirationTimestamp": time.Now().Add(time.Hour).Format(time.RFC3339)}})
	return map[string]string{spec.KeyRole: role, spec.KeyPodNamespace: "pushers", spec.KeyServiceAccount: "pusher", spec.KeyTokens: string(tokens)}
}

func (r *pushRig) push(t *testing.T, p *vault.Provider, items ...server.PushItem) []server.PushResult {
	t.Helper()
	res, err := p.Push(t.Context(), &server.PushRequest{Attributes: r.attrs(t, "pusher"), Secrets: map[string]string{}, Items: items})
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	if len(res) != len(items) {
		t.Fatalf("push: %d results for %d items", len(res), len(items))
	}
	return res
}

func (r *pushRig) remove(t *testing.T, items ...server.PushItem) []server.PushResult {
	t.Helper()
	res, err := r.p.Remove(t.Context(), &server.PushRequest{Attributes: r.attrs(t, "pusher"), Secrets: map[string]string{}, Items: items})
	if err != nil {
		t.Fatalf("remove: %v", err)
	}
	if len(res) != len(items) {
		t.Fatalf("remove: %d results for %d items", len(res), len(items))
	}
	return res
}

// item is a whole-object item of secret/data/<name>.
func item(name, value, last string, policy keymountv1.UpdatePolicy) server.PushItem {
	return server.PushItem{RemoteKey: vaultenv.KVv2Mount + "/data/" + name, Value: []byte(value), LastVersion: last, Policy: policy, Owner: owner}
}

// expect fails unless res is one result of outcome and version.
func expect(t *testing.T, res server.PushResult, outcome keymountv1.Outcome, version string) {
	t.Helper()
	if res.Outcome != outcome || res.Version != version {
		t.Fatalf("result %v version %q (%s), want %v version %q", res.Outcome, res.Version, res.Message, outcome, version)
	}
}

// kv reads secret/<name> as root: its fields, current version and
// custom_metadata.
func (r *pushRig) kv(t *testing.T, name string) (map[string]any, int, map[string]any) {
	t.Helper()
	s, err := r.vault.Client.Logical().ReadWithContext(t.Context(), vaultenv.KVv2Mount+"/metadata/"+name)
	if err != nil || s == nil {
		t.Fatalf("read the metadata of %s: %v", name, err)
	}
	custom, _ := s.Data["custom_metadata"].(map[string]any)
	cur, _ := s.Data["current_version"].(json.Number)
	v, _ := cur.Int64()
	d, err := r.vault.Client.Logical().ReadWithContext(t.Context(), vaultenv.KVv2Mount+"/data/"+name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	var fields map[string]any
	if d != nil {
		fields, _ = d.Data["data"].(map[string]any)
	}
	return fields, int(v), custom
}

// fieldsAre fails unless secret/<name> holds want (values compared as
// text).
func (r *pushRig) fieldsAre(t *testing.T, name string, want map[string]string) int {
	t.Helper()
	fields, version, _ := r.kv(t, name)
	got := map[string]string{}
	for k, v := range fields {
		got[k] = fmt.Sprint(v)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s holds %v at version %d, want %v", name, got, version, want)
	}
	return version
}

// requests counts the successful requests on secret/<name>'s data and
// metadata by operation.
func (r *pushRig) requests(t *testing.T, name string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, e := range r.vault.Audit(t) {
		for _, kind := range []string{"data", "metadata"} {
			if e.Error == "" && e.Request.Path == vaultenv.KVv2Mount+"/"+kind+"/"+name {
				n[e.Request.Operation+" "+kind]++
			}
		}
	}
	return n
}

const (
	replace     = keymountv1.UpdatePolicy_UPDATE_POLICY_REPLACE
	overwrite   = keymountv1.UpdatePolicy_UPDATE_POLICY_OVERWRITE
	ifNotExists = keymountv1.UpdatePolicy_UPDATE_POLICY_IF_NOT_EXISTS
)

func (r *pushRig) testCreateUnchangedUpdate(t *testing.T) {
	expect(t, r.push(t, r.p, item("create", `{"user":"u","port":5432}`, "", replace))[0], keymountv1.Outcome_OUTCOME_CREATED, "1")
	r.fieldsAre(t, "create", map[string]string{"user": "u", "port": "5432"})
	if _, _, custom := r.kv(t, "create"); custom[`keymount.io/pushed-by`] != owner {
		t.Errorf("custom_metadata %v, want keymount.io/pushed-by %s", custom, owner)
	}

	before := r.requests(t, "create")
	unchanged := item("create", `{"user":"u","port":5432}`, "1", replace)
	unchanged.Unchanged = true
	expect(t, r.push(t, r.p, unchanged)[0], keymountv1.Outcome_OUTCOME_UNCHANGED, "1")
	after := r.requests(t, "create")
	for op, n := range after {
		want := before[op]
		if op == "read metadata" {
			want++
		}
		if n != want {
			t.Errorf("an unchanged push: %d %s requests after, %d before; want one metadata read and nothing else", n, op, before[op])
		}
	}

	expect(t, r.push(t, r.p, item("create", `{"user":"u2"}`, "1", replace))[0], keymountv1.Outcome_OUTCOME_UPDATED, "2")
	r.fieldsAre(t, "create", map[string]string{"user": "u2"})
}

func (r *pushRig) testPropertyMerge(t *testing.T) {
	r.vault.PutKVv2(t, "merge", map[string]any{"other": "keep"})
	token := server.PushItem{RemoteKey: "secret/data/merge", Property: "token", Value: []byte("t1"), Policy: overwrite, Owner: owner}
	expect(t, r.push(t, r.p, token)[0], keymountv1.Outcome_OUTCOME_UPDATED, "2")
	r.fieldsAre(t, "merge", map[string]string{"other": "keep", "token": "t1"})

	token.Value, token.LastVersion, token.Policy = []byte("t2"), "2", replace
	expect(t, r.push(t, r.p, token)[0], keymountv1.Outcome_OUTCOME_UPDATED, "3")
	r.fieldsAre(t, "merge", map[string]string{"other": "keep", "token": "t2"})

	// Two items of one path: one write, one result for both.
	before := r.requests(t, "merge")
	a := server.PushItem{RemoteKey: "secret/data/merge", Property: "a", Value: []byte("1"), LastVersion: "3", Owner: owner}
	b := a
	b.Property, b.Value = "b", []byte("2")
	res := r.push(t, r.p, a, b)
	expect(t, res[0], keymountv1.Outcome_OUTCOME_UPDATED, "4")
	expect(t, res[1], keymountv1.Outcome_OUTCOME_UPDATED, "4")
	r.fieldsAre(t, "merge", map[string]string{"other": "keep", "token": "t2", "a": "1", "b": "2"})
	if writes := r.requests(t, "merge")["update data"] + r.requests(t, "merge")["create data"] - before["update data"] - before["create data"]; writes != 1 {
		t.Errorf("two items of one path: %d writes, want 1", writes)
	}
}

func (r *pushRig) testConflict(t *testing.T) {
	expect(t, r.push(t, r.p, item("theirs", `{"k":"mine-1"}`, "", replace))[0], keymountv1.Outcome_OUTCOME_CREATED, "1")
	r.vault.PutKVv2(t, "theirs", map[string]any{"k": "their-value"})
	res := r.push(t, r.p, item("theirs", `{"k":"mine-2"}`, "1", replace))[0]
	expect(t, res, keymountv1.Outcome_OUTCOME_CONFLICT, "")
	for _, s := range []string{"secret/data/theirs", "version 2", "keymount wrote version 1"} {
		if !strings.Contains(res.Message, s) {
			t.Errorf("conflict message %q does not say %q", res.Message, s)
		}
	}
	if strings.Contains(res.Message, "their-value") || strings.Contains(res.Message, "mine-") {
		t.Errorf("conflict message %q quotes a value", res.Message)
	}
	r.fieldsAre(t, "theirs", map[string]string{"k": "their-value"})

	r.vault.PutKVv2(t, "unmarked", map[string]any{"k": "their-value"})
	res = r.push(t, r.p, item("unmarked", `{"k":"mine"}`, "", replace))[0]
	expect(t, res, keymountv1.Outcome_OUTCOME_CONFLICT, "")
	if !strings.Contains(res.Message, "keymount has written none") {
		t.Errorf("conflict message %q does not say keymount wrote none", res.Message)
	}

	t.Run("Overwrite", func(t *testing.T) {
		expect(t, r.push(t, r.p, item("theirs", `{"k":"mine-3"}`, "1", overwrite))[0], keymountv1.Outcome_OUTCOME_UPDATED, "3")
		r.fieldsAre(t, "theirs", map[string]string{"k": "mine-3"})
	})
}

func (r *pushRig) testESOMarked(t *testing.T) {
	r.vault.PutKVv2(t, "eso", map[string]any{"k": "old"})
	r.vault.Write(t, "secret/metadata/eso", map[string]any{"custom_metadata": map[string]any{"managed-by": "external-secrets", "team": "a"}})
	expect(t, r.push(t, r.p, item("eso", `{"k":"new"}`, "", replace))[0], keymountv1.Outcome_OUTCOME_UPDATED, "2")
	r.fieldsAre(t, "eso", map[string]string{"k": "new"})
	_, _, custom := r.kv(t, "eso")
	if custom["managed-by"] != "external-secrets" || custom["team"] != "a" || custom["keymount.io/pushed-by"] != owner {
		t.Errorf("custom_metadata %v: want the others' keys kept and keymount.io/pushed-by %s", custom, owner)
	}
	// Marked by keymount for this owner (a PushSecret whose status was lost).
	expect(t, r.push(t, r.p, item("eso", `{"k":"newer"}`, "", replace))[0], keymountv1.Outcome_OUTCOME_UPDATED, "3")
}

func (r *pushRig) testIdenticalAdopted(t *testing.T) {
	r.vault.PutKVv2(t, "same", map[string]any{"k": "v", "n": 1})
	before := r.requests(t, "same")
	expect(t, r.push(t, r.p, item("same", `{"n":1,"k":"v"}`, "", replace))[0], keymountv1.Outcome_OUTCOME_ADOPTED, "1")
	after := r.requests(t, "same")
	if after["update data"] != before["update data"] || after["create data"] != before["create data"] {
		t.Errorf("adopting wrote the value: %v before, %v after", before, after)
	}
	if _, _, custom := r.kv(t, "same"); custom["keymount.io/pushed-by"] != owner {
		t.Errorf("custom_metadata %v, want keymount.io/pushed-by %s", custom, owner)
	}
}

func (r *pushRig) testIfNotExists(t *testing.T) {
	r.vault.PutKVv2(t, "taken", map[string]any{"k": "theirs"})
	expect(t, r.push(t, r.p, item("taken", `{"k":"mine"}`, "", ifNotExists))[0], keymountv1.Outcome_OUTCOME_SKIPPED, "")
	r.fieldsAre(t, "taken", map[string]string{"k": "theirs"})
	expect(t, r.push(t, r.p, item("free", `{"k":"mine"}`, "", ifNotExists))[0], keymountv1.Outcome_OUTCOME_CREATED, "1")
	// Never again once something is there, keymount's value included.
	expect(t, r.push(t, r.p, item("free", `{"k":"mine-2"}`, "1", ifNotExists))[0], keymountv1.Outcome_OUTCOME_SKIPPED, "1")
	r.fieldsAre(t, "free", map[string]string{"k": "mine"})
}

// testRace: two writers push from the same last version at once, round
// after round: exactly one updates, the other is a conflict, and the
// winner's value is current.
func (r *pushRig) testRace(t *testing.T) {
	other := r.provider(t, vault.Config{})
	expect(t, r.push(t, r.p, item("race", `{"n":"0"}`, "", replace))[0], keymountv1.Outcome_OUTCOME_CREATED, "1")
	last := "1"
	for round := range 5 {
		values := [2]string{fmt.Sprintf("a%d", round), fmt.Sprintf("b%d", round)}
		var results [2]server.PushResult
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, p := range []*vault.Provider{r.p, other} {
			it := item("race", `{"n":"`+values[i]+`"}`, last, replace)
			attrs := r.attrs(t, "pusher")
			wg.Go(func() {
				<-start
				res, err := p.Push(context.WithoutCancel(t.Context()), &server.PushRequest{Attributes: attrs, Secrets: map[string]string{}, Items: []server.PushItem{it}})
				if err != nil || len(res) != 1 {
					results[i] = server.PushResult{Outcome: keymountv1.Outcome_OUTCOME_FAILED, Message: fmt.Sprint(err)}
					return
				}
				results[i] = res[0]
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, res := range results {
			switch res.Outcome {
			case keymountv1.Outcome_OUTCOME_UPDATED:
				if winner >= 0 {
					t.Fatalf("round %d: both writers updated", round)
				}
				winner = i
			case keymountv1.Outcome_OUTCOME_CONFLICT:
			default:
				t.Fatalf("round %d: writer %d: %v (%s), want UPDATED or CONFLICT", round, i, res.Outcome, res.Message)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer updated: %+v", round, results)
		}
		v := r.fieldsAre(t, "race", map[string]string{"n": values[winner]})
		if results[winner].Version != fmt.Sprint(v) {
			t.Fatalf("round %d: the winner reported version %s, Vault is at %d", round, results[winner].Version, v)
		}
		last = results[winner].Version
	}
}

func (r *pushRig) testFailedItem(t *testing.T) {
	res := r.push(t, r.p,
		item("not-an-object", `"s3cr3t"`, "", replace),
		item("forbidden/x", `{"k":"v"}`, "", replace),
		item("fine", `{"k":"v"}`, "", replace),
		server.PushItem{RemoteKey: "secret/data/typed", Value: []byte(`{"k":"v"}`), ObjectType: "secretsmanager", Owner: owner})
	expect(t, res[0], keymountv1.Outcome_OUTCOME_FAILED, "")
	if !strings.Contains(res[0].Message, "secret/data/not-an-object") || strings.Contains(res[0].Message, "s3cr3t") {
		t.Errorf("message %q: want the remote key named and no value", res[0].Message)
	}
	expect(t, res[1], keymountv1.Outcome_OUTCOME_FAILED, "")
	if !strings.Contains(res[1].Message, "secret/") || !strings.Contains(res[1].Message, "permission denied") {
		t.Errorf("message %q: want the path and Vault's words", res[1].Message)
	}
	expect(t, res[2], keymountv1.Outcome_OUTCOME_CREATED, "1")
	expect(t, res[3], keymountv1.Outcome_OUTCOME_FAILED, "")
	if !strings.Contains(res[3].Message, "KV secrets only") {
		t.Errorf("message %q: want the object type refused", res[3].Message)
	}
}

func (r *pushRig) testLoginRefused(t *testing.T) {
	_, err := r.p.Push(t.Context(), &server.PushRequest{Attributes: r.attrs(t, "nobody"), Secrets: map[string]string{},
		Items: []server.PushItem{item("refused", `{"k":"v"}`, "", replace)}})
	if server.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `role "nobody"`) {
		t.Fatalf("push with an unknown role: %v, want PermissionDenied naming the role", err)
	}
}
