package store_test

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/internal/datafrom"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/tests/motoserver"
)

// Targets of the store calls the find tests count.
const (
	opList   = "secretsmanager.ListSecrets"
	opBatch  = "secretsmanager.BatchGetSecretValue"
	opByPath = "AmazonSSM.GetParametersByPath"
)

// findClients are SDK clients on moto, to change the store between
// fetches.
type findClients struct {
	sm *secretsmanager.Client
	ps *ssm.Client
}

// setupFind starts moto with setupMoto's objects plus tagged secrets under
// team/ (team/a/db: team=a env=prod; team/a/api: team=a env=dev; team/b/db:
// team=b; team/ab/x: team=ab) and parameters under /app/nested.
func setupFind(t *testing.T) (*motoFixtures, *findClients) {
	t.Helper()
	f := setupMoto(t)
	c := &findClients{
		sm: secretsmanager.New(secretsmanager.Options{Region: region, BaseEndpoint: aws.String(f.endpoint), Credentials: motoserver.Credentials()}),
		ps: ssm.New(ssm.Options{Region: region, BaseEndpoint: aws.String(f.endpoint), Credentials: motoserver.Credentials()}),
	}
	for _, s := range []struct {
		name, value string
		tags        map[string]string
	}{
		{"team/a/db", "a-db", map[string]string{"team": "a", "env": "prod"}},
		{"team/a/api", "a-api", map[string]string{"team": "a", "env": "dev"}},
		{"team/b/db", "b-db", map[string]string{"team": "b"}},
		{"team/ab/x", "ab-x", map[string]string{"team": "ab", "env": "prod"}},
	} {
		c.createSecret(t, s.name, s.value, s.tags)
	}
	c.putParameter(t, "/app/nested/deep", "deep")
	return f, c
}

func (c *findClients) createSecret(t *testing.T, name, value string, tags map[string]string) {
	t.Helper()
	in := &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		in.Tags = append(in.Tags, smtypes.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	if _, err := c.sm.CreateSecret(t.Context(), in); err != nil {
		t.Fatal(err)
	}
}

func (c *findClients) putParameter(t *testing.T, name, value string) {
	t.Helper()
	if _, err := c.ps.PutParameter(t.Context(), &ssm.PutParameterInput{
		Name: aws.String(name), Value: aws.String(value), Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true),
	}); err != nil {
		t.Fatal(err)
	}
}

// findObject is a find object writing under dir.
func findObject(t *testing.T, typ spec.ObjectType, dir string, f spec.Find) spec.Object {
	t.Helper()
	if f.Keys == nil {
		f.Keys = compileKeys(t, datafrom.Options{})
	}
	return spec.Object{Type: typ, FileName: dir, Mode: 0o640, Find: &f}
}

func bulkFiles(dir string, n int) map[string]string {
	out := map[string]string{}
	for i := range n {
		out[fmt.Sprintf("%s/bulk_s%d", dir, i)] = fmt.Sprintf("sv%d", i)
	}
	return out
}

// TestMotoFind: find objects against moto select secrets by path prefix,
// by an unanchored name regexp and by exact tags, and parameters by path
// (recursively) and regexp; found names become keys as External Secrets
// makes them ("/" to "_" unless rewritten); no match is an empty directory.
func TestMotoFind(t *testing.T) {
	f, _ := setupFind(t)
	sm, ps := spec.SecretsManager, spec.SSMParameter
	tests := []struct {
		name  string
		obj   spec.Object
		files map[string]string
	}{{
		name:  "secrets by path",
		obj:   findObject(t, sm, "all", spec.Find{Path: "bulk/"}),
		files: bulkFiles("all", 25),
	}, {
		name: "secrets by name regexp, unanchored",
		obj:  findObject(t, sm, "teens", spec.Find{Name: regexp.MustCompile(`s1\d$`)}),
		files: func() map[string]string {
			out := map[string]string{}
			for i := 10; i < 20; i++ {
				out[fmt.Sprintf("teens/bulk_s%d", i)] = fmt.Sprintf("sv%d", i)
			}
			return out
		}(),
	}, {
		// team/a/api has team=a but env=dev, team/b/db team=b, team/ab/x
		// team=ab (which AWS's prefix filter lets through).
		name:  "secrets by tags, every tag with its value",
		obj:   findObject(t, sm, "tagged", spec.Find{Tags: map[string]string{"team": "a", "env": "prod"}}),
		files: map[string]string{"tagged/team_a_db": "a-db"},
	}, {
		name:  "secrets by one tag",
		obj:   findObject(t, sm, "a", spec.Find{Tags: map[string]string{"team": "a"}}),
		files: map[string]string{"a/team_a_db": "a-db", "a/team_a_api": "a-api"},
	}, {
		name: "path, regexp and a rewrite",
		obj: findObject(t, sm, "dbs", spec.Find{Path: "team/", Name: regexp.MustCompile(`/db$`), Keys: compileKeys(t, datafrom.Options{
			Rewrite: []datafrom.Rewrite{{Regexp: &datafrom.RegexpRewrite{Source: `^team/(\w+)/db$`, Target: "${1}_DB"}}},
		})}),
		files: map[string]string{"dbs/a_DB": "a-db", "dbs/b_DB": "b-db"},
	}, {
		name:  "nothing matches",
		obj:   findObject(t, sm, "none", spec.Find{Path: "nosuch/"}),
		files: map[string]string{},
	}, {
		name: "parameters by path, recursively",
		obj:  findObject(t, ps, "app", spec.Find{Path: "/app"}),
		files: map[string]string{
			"app/_app_str": "second", "app/_app_secure": "hunter2", "app/_app_list": "a,b,c",
			"app/_app_json": `{"token":"t0k","n":1}`, "app/_app_nested_deep": "deep",
		},
	}, {
		name:  "parameters by path and regexp",
		obj:   findObject(t, ps, "app", spec.Find{Path: "/app", Name: regexp.MustCompile(`s(tr|ecure)$`)}),
		files: map[string]string{"app/_app_str": "second", "app/_app_secure": "hunter2"},
	}}
	s := store.New(store.Config{Endpoint: f.endpoint})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.Fetch(t.Context(), motoRequest([]spec.Object{tt.obj}))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.files, contents(res)); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			for _, file := range res.Files {
				if file.Mode != 0o640 {
					t.Errorf("%s: mode %o, want 640", file.Path, file.Mode)
				}
			}
			if v := versions(res)[tt.obj.FileName]; len(res.Versions) != 1 || v == "" {
				t.Errorf("versions = %v, want one non-empty version of %s", res.Versions, tt.obj.FileName)
			}
		})
	}
}

// TestMotoFindRefresh: a secret or parameter added to the store arrives
// with the first fetch after the freshness window, one deleted (or pending
// deletion) leaves, a changed one is read again; each refresh costs one
// listing and one read per 20 new or changed secrets (none for parameters:
// their values come with the listing), and within the window nothing.
func TestMotoFindRefresh(t *testing.T) {
	f, c := setupFind(t)
	clk := clocktesting.NewFakeClock(time.Now())
	hc := &countingClient{calls: map[string]int{}}
	s := store.New(store.Config{Endpoint: f.endpoint, Clock: clk, HTTPClient: hc})
	req := motoRequest([]spec.Object{
		findObject(t, spec.SecretsManager, "team", spec.Find{Path: "team/"}),
		findObject(t, spec.SSMParameter, "nested", spec.Find{Path: "/app/nested"}),
	})
	fetch := func() (map[string]string, map[string]string) {
		t.Helper()
		res, err := s.Fetch(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return contents(res), versions(res)
	}

	files, first := fetch()
	wantCalls(t, hc.take(), map[string]int{opList: 1, opBatch: 1, opByPath: 1})
	want := map[string]string{
		"team/team_a_db": "a-db", "team/team_a_api": "a-api", "team/team_b_db": "b-db", "team/team_ab_x": "ab-x",
		"nested/_app_nested_deep": "deep",
	}
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}

	clk.Step(store.DefaultFreshness / 2)
	if _, again := fetch(); !maps.Equal(again, first) {
		t.Errorf("versions within the window %v, want %v", again, first)
	}
	wantCalls(t, hc.take(), map[string]int{})

	// Nothing changed: the listings confirm every cached value.
	clk.Step(store.DefaultFreshness)
	if _, same := fetch(); !maps.Equal(same, first) {
		t.Errorf("versions with nothing changed %v, want %v", same, first)
	}
	wantCalls(t, hc.take(), map[string]int{opList: 1, opByPath: 1})

	c.createSecret(t, "team/c/new", "c-new", nil)
	c.putParameter(t, "/app/nested/more/x", "x")
	clk.Step(store.DefaultFreshness)
	files, added := fetch()
	wantCalls(t, hc.take(), map[string]int{opList: 1, opBatch: 1, opByPath: 1})
	want["team/team_c_new"], want["nested/_app_nested_more_x"] = "c-new", "x"
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("files after adding (-want +got):\n%s", diff)
	}
	if added["team"] == first["team"] || added["nested"] == first["nested"] {
		t.Errorf("versions after adding %v, first %v: want both changed", added, first)
	}

	if _, err := c.sm.DeleteSecret(t.Context(), &secretsmanager.DeleteSecretInput{SecretId: aws.String("team/b/db"), ForceDeleteWithoutRecovery: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.sm.DeleteSecret(t.Context(), &secretsmanager.DeleteSecretInput{SecretId: aws.String("team/ab/x"), RecoveryWindowInDays: aws.Int64(7)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.sm.PutSecretValue(t.Context(), &secretsmanager.PutSecretValueInput{SecretId: aws.String("team/a/db"), SecretString: aws.String("a-db 2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ps.DeleteParameter(t.Context(), &ssm.DeleteParameterInput{Name: aws.String("/app/nested/deep")}); err != nil {
		t.Fatal(err)
	}
	clk.Step(store.DefaultFreshness)
	files, removed := fetch()
	wantCalls(t, hc.take(), map[string]int{opList: 1, opBatch: 1, opByPath: 1})
	want = map[string]string{
		"team/team_a_db": "a-db 2", "team/team_a_api": "a-api", "team/team_c_new": "c-new",
		"nested/_app_nested_more_x": "x",
	}
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("files after deleting and changing (-want +got):\n%s", diff)
	}
	if removed["team"] == added["team"] || removed["nested"] == added["nested"] {
		t.Errorf("versions after deleting %v, before %v: want both changed", removed, added)
	}
}

// TestMotoFindSharesCalls: 20 pods of one identity mounting at once a find
// of 25 secrets plus one named secret cost one ListSecrets and
// ceil(26/20) = 2 BatchGetSecretValue calls; a find of 12 parameters plus
// one of them by name costs the listing's 2 pages and nothing else (the
// named one is read from the listing's values).
func TestMotoFindSharesCalls(t *testing.T) {
	f := setupMoto(t)
	hc := &countingClient{calls: map[string]int{}}
	s := store.New(store.Config{Endpoint: f.endpoint, HTTPClient: hc})
	objs := []spec.Object{
		findObject(t, spec.SecretsManager, "bulk", spec.Find{Path: "bulk/"}),
		{Name: "multi", Type: spec.SecretsManager},
	}
	pods := func(objs []spec.Object) []map[string]string {
		out := make([]map[string]string, 20)
		var wg sync.WaitGroup
		for i := range out {
			wg.Go(func() {
				res, err := s.Fetch(t.Context(), motoRequest(slices.Clone(objs)))
				if err != nil {
					t.Errorf("pod %d: %v", i, err)
					return
				}
				out[i] = contents(res)
			})
		}
		wg.Wait()
		return out
	}
	want := bulkFiles("bulk", 25)
	want["multi"] = "two"
	for i, got := range pods(objs) {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pod %d: files (-want +got):\n%s", i, diff)
		}
	}
	wantCalls(t, hc.take(), map[string]int{opList: 1, opBatch: 2})

	params := []spec.Object{
		findObject(t, spec.SSMParameter, "p", spec.Find{Path: "/bulk"}),
		{Name: "/bulk/p3", Type: spec.SSMParameter, FileName: "p3"},
	}
	for i, got := range pods(params) {
		if len(got) != 13 || got["p3"] != "pv3" || got["p/_bulk_p11"] != "pv11" {
			t.Errorf("pod %d: %d files, p3 = %q, p/_bulk_p11 = %q; want 13, pv3 and pv11", i, len(got), got["p3"], got["p/_bulk_p11"])
		}
	}
	wantCalls(t, hc.take(), map[string]int{opByPath: 2})
}

// TestFindFailures: a listing denied or throttled fails the find object with
// its kind and code, naming the object's directory and criteria; a found
// secret that cannot be read fails it naming the secret; one gone since
// the listing is left out. No value is in any error.
func TestFindFailures(t *testing.T) {
	fake := newFakeAWS(t)
	s := fastStore(fake.url, nil)
	// The fake lists the secrets a call has named.
	if _, err := s.Fetch(t.Context(), request("role-a", objects(3, 0))); err != nil {
		t.Fatal(err)
	}
	find := findObject(t, spec.SecretsManager, "found", spec.Find{Path: "s"})
	named := findObject(t, spec.SecretsManager, "named", spec.Find{Path: "s", Name: regexp.MustCompile("^s")})

	res, err := s.Fetch(t.Context(), request("role-a", []spec.Object{find}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"found/s0": "s0@1", "found/s1": "s1@1", "found/s2": "s2@1"}, contents(res)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}

	fake.fault = func(call fakeCall) (int, any) {
		if call.Target == opBatch {
			// s1 is denied (a KMS key), s2 was deleted since the listing.
			return http.StatusOK, map[string]any{
				"SecretValues": []map[string]any{secretJSON("s0", "1")},
				"Errors": []map[string]any{
					{"SecretId": "s1", "ErrorCode": "AccessDeniedException"},
					{"SecretId": "s2", "ErrorCode": "ResourceNotFoundException"},
				},
			}
		}
		return 0, nil
	}
	_, err = s.Fetch(t.Context(), request("role-b", []spec.Object{find}))
	wantErr(t, err, codes.PermissionDenied, `found: access denied: secretsmanager "s1": AccessDeniedException (secretsmanager find path "s" in region us-east-1)`)

	fake.fault = func(call fakeCall) (int, any) {
		if call.Target == opBatch {
			return http.StatusOK, map[string]any{
				"SecretValues": []map[string]any{secretJSON("s0", "1"), secretJSON("s1", "1")},
				"Errors":       []map[string]any{{"SecretId": "s2", "ErrorCode": "ResourceNotFoundException"}},
			}
		}
		return 0, nil
	}
	res, err = s.Fetch(t.Context(), request("role-c", []spec.Object{find}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"found/s0": "s0@1", "found/s1": "s1@1"}, contents(res)); diff != "" {
		t.Errorf("files with s2 gone (-want +got):\n%s", diff)
	}

	fake.fault = func(call fakeCall) (int, any) {
		if call.Target == opList {
			return apiError("AccessDeniedException")
		}
		return 0, nil
	}
	_, err = s.Fetch(t.Context(), request("role-d", []spec.Object{named}))
	wantErr(t, err, codes.PermissionDenied, `named: access denied: AccessDeniedException (secretsmanager find path "s" name "^s" in region us-east-1)`)

	fake.fault = func(call fakeCall) (int, any) {
		if call.Target == opByPath {
			return apiError("ThrottlingException")
		}
		return 0, nil
	}
	params := findObject(t, spec.SSMParameter, "params", spec.Find{Path: "/prod"})
	_, err = s.Fetch(t.Context(), request("role-e", []spec.Object{params}))
	wantErr(t, err, codes.ResourceExhausted, `params: throttled: ThrottlingException after retries (ssmparameter find path "/prod" in region us-east-1)`)
}

func wantErr(t *testing.T, err error, code codes.Code, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Fetch succeeded, want %s", substr)
	}
	if got := status.Code(err); got != code {
		t.Errorf("code %s, want %s (%v)", got, code, err)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Errorf("error %q does not contain %q", err, substr)
	}
	if strings.Contains(err.Error(), "@1") {
		t.Errorf("error %q holds a value", err)
	}
}

// TestMotoFindReadsAfterMaxListedAge: a find listing confirms cached values
// for MaxListedAge only (ListSecrets is eventually consistent): the found
// secrets are then read again, together, in full batches.
func TestMotoFindReadsAfterMaxListedAge(t *testing.T) {
	f := setupMoto(t)
	clk := clocktesting.NewFakeClock(time.Now())
	hc := &countingClient{calls: map[string]int{}}
	s := store.New(store.Config{Endpoint: f.endpoint, Clock: clk, HTTPClient: hc})
	req := motoRequest([]spec.Object{findObject(t, spec.SecretsManager, "bulk", spec.Find{Path: "bulk/"})})
	if _, err := s.Fetch(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, hc.take(), map[string]int{opList: 1, opBatch: 2})
	refreshes := int(store.DefaultMaxListedAge / store.DefaultFreshness)
	for i := 1; i <= refreshes; i++ {
		clk.Step(store.DefaultFreshness)
		res, err := s.Fetch(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{opList: 1}
		if i == refreshes {
			want[opBatch] = 2
		}
		if got := hc.take(); !maps.Equal(got, want) {
			t.Errorf("refresh %d (%v after the read): calls %v, want %v", i, time.Duration(i)*store.DefaultFreshness, got, want)
		}
		if got := contents(res)["bulk/bulk_s7"]; got != "sv7" {
			t.Errorf("refresh %d: bulk/bulk_s7 = %q, want sv7", i, got)
		}
	}
}
