package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/internal/datafrom"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/tests/motoserver"
)

const region = "us-east-1"

// motoFixtures creates, through the SDK, the objects the moto tests read.
type motoFixtures struct {
	endpoint string
	v1, v2   string // versions of "multi": v1 is AWSPREVIOUS, v2 AWSCURRENT and "blue"
}

func setupMoto(t *testing.T) *motoFixtures {
	t.Helper()
	endpoint := motoserver.Start(t)
	ctx := t.Context()
	sm := secretsmanager.New(secretsmanager.Options{Region: region, BaseEndpoint: aws.String(endpoint), Credentials: motoserver.Credentials()})
	ps := ssm.New(ssm.Options{Region: region, BaseEndpoint: aws.String(endpoint), Credentials: motoserver.Credentials()})
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	f := &motoFixtures{endpoint: endpoint}

	c, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("multi"), SecretString: aws.String("one")})
	must(c, err)
	f.v1 = aws.ToString(c.VersionId)
	p, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("multi"), SecretString: aws.String("two")})
	must(p, err)
	f.v2 = aws.ToString(p.VersionId)
	must(sm.UpdateSecretVersionStage(ctx, &secretsmanager.UpdateSecretVersionStageInput{
		SecretId: aws.String("multi"), VersionStage: aws.String("blue"), MoveToVersionId: aws.String(f.v2),
	}))
	must(sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("bin"), SecretBinary: []byte{0, 1, 2, 0xff}}))
	must(sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("json"), SecretString: aws.String(`{"user":"admin","port":5432,"nested":{"a":[1,2]}}`)}))
	for i := range 25 {
		must(sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(fmt.Sprintf("bulk/s%d", i)), SecretString: aws.String(fmt.Sprintf("sv%d", i))}))
	}

	put := func(name, val string, typ ssmtypes.ParameterType) {
		t.Helper()
		must(ps.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(val), Type: typ, Overwrite: aws.Bool(true)}))
	}
	put("/app/str", "first", ssmtypes.ParameterTypeString)
	put("/app/str", "second", ssmtypes.ParameterTypeString)
	must(ps.LabelParameterVersion(ctx, &ssm.LabelParameterVersionInput{Name: aws.String("/app/str"), ParameterVersion: aws.Int64(1), Labels: []string{"stable"}}))
	put("/app/secure", "hunter2", ssmtypes.ParameterTypeSecureString)
	put("/app/list", "a,b,c", ssmtypes.ParameterTypeStringList)
	put("/app/json", `{"token":"t0k","n":1}`, ssmtypes.ParameterTypeSecureString)
	for i := range 12 {
		put(fmt.Sprintf("/bulk/p%d", i), fmt.Sprintf("pv%d", i), ssmtypes.ParameterTypeString)
	}
	return f
}

func compileKeys(t *testing.T, o datafrom.Options) *datafrom.Compiled {
	t.Helper()
	c, err := o.Compile("extract")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func motoRequest(objs []spec.Object) *store.Request {
	for i := range objs {
		if objs[i].FileName == "" {
			objs[i].FileName = strings.ReplaceAll(strings.TrimPrefix(objs[i].Name, "/"), "/", "_")
		}
		if objs[i].Mode == 0 {
			objs[i].Mode = 0o644
		}
		for j := range objs[i].JMESPaths {
			if jp := &objs[i].JMESPaths[j]; jp.FileName == "" {
				jp.FileName = strings.ReplaceAll(jp.Alias, "/", "_")
			}
		}
	}
	return &store.Request{Identity: "moto", Credentials: motoserver.Credentials(), Region: region, Objects: objs}
}

func TestFetchFromMoto(t *testing.T) {
	f := setupMoto(t)
	sm, ps := spec.SecretsManager, spec.SSMParameter
	tests := []struct {
		name      string
		objs      []spec.Object
		files     map[string]string
		versions  map[string]string
		errCode   codes.Code
		errSubstr []string
	}{{
		name: "secret versions and stages",
		objs: []spec.Object{
			{Name: "multi", Type: sm, FileName: "latest"},
			{Name: "multi", Type: sm, FileName: "old", Version: f.v1},
			{Name: "multi", Type: sm, FileName: "previous", VersionLabel: "AWSPREVIOUS"},
			{Name: "multi", Type: sm, FileName: "blue", VersionLabel: "blue"},
		},
		files:    map[string]string{"latest": "two", "old": "one", "previous": "one", "blue": "two"},
		versions: map[string]string{"latest": f.v2, "old": f.v1, "previous": f.v1, "blue": f.v2},
	}, {
		name:  "binary secret",
		objs:  []spec.Object{{Name: "bin", Type: sm}},
		files: map[string]string{"bin": "\x00\x01\x02\xff"},
	}, {
		name: "jmesPath",
		objs: []spec.Object{{Name: "json", Type: sm, JMESPaths: []spec.JMESPath{
			{Path: "user", Alias: "db/user"}, {Path: "port", Alias: "port"}, {Path: "nested.a", Alias: "a"},
		}}},
		// A file per entry, named by its FileName (the alias translated as
		// the spec translates it), never by the raw alias.
		files: map[string]string{"json": `{"user":"admin","port":5432,"nested":{"a":[1,2]}}`, "db_user": "admin", "port": "5432", "a": "[1,2]"},
	}, {
		name:      "jmesPath matching nothing",
		objs:      []spec.Object{{Name: "json", Type: sm, JMESPaths: []spec.JMESPath{{Path: "nope", Alias: "x"}}}},
		errCode:   codes.InvalidArgument,
		errSubstr: []string{`json: invalid: jmesPath "nope": matches nothing`},
	}, {
		name:      "jmesPath on a non-JSON secret",
		objs:      []spec.Object{{Name: "multi", Type: sm, JMESPaths: []spec.JMESPath{{Path: "a", Alias: "x"}}}},
		errCode:   codes.InvalidArgument,
		errSubstr: []string{"multi: invalid: jmesPath needs a JSON value"},
	}, {
		name:  "extract: every field its own file under the object's file name",
		objs:  []spec.Object{{Name: "json", Type: sm, FileName: "db", Extract: compileKeys(t, datafrom.Options{})}},
		files: map[string]string{"db/user": "admin", "db/port": "5432", "db/nested": `{"a":[1,2]}`},
	}, {
		name: "extract with a rewrite, from a parameter",
		objs: []spec.Object{{Name: "/app/json", Type: ps, FileName: "p", Extract: compileKeys(t, datafrom.Options{
			Rewrite: []datafrom.Rewrite{{Regexp: &datafrom.RegexpRewrite{Source: "^", Target: "APP_"}}}})}},
		files: map[string]string{"p/APP_token": "t0k", "p/APP_n": "1"},
	}, {
		name:      "extract on a value that is no JSON object",
		objs:      []spec.Object{{Name: "multi", Type: sm, FileName: "m", Extract: compileKeys(t, datafrom.Options{})}},
		errCode:   codes.InvalidArgument,
		errSubstr: []string{"m: invalid: extract needs a JSON object, the value is not one"},
	}, {
		name: "parameters: types, versions and labels",
		objs: []spec.Object{
			{Name: "/app/str", Type: ps},
			{Name: "/app/str", Type: ps, FileName: "v1", Version: "1"},
			{Name: "/app/str", Type: ps, FileName: "stable", VersionLabel: "stable"},
			{Name: "/app/secure", Type: ps},
			{Name: "/app/list", Type: ps},
		},
		files:    map[string]string{"app_str": "second", "v1": "first", "stable": "first", "app_secure": "hunter2", "app_list": "a,b,c"},
		versions: map[string]string{"app_str": "2", "v1": "1", "stable": "1", "app_secure": "1", "app_list": "1"},
	}, {
		name: "missing objects",
		objs: []spec.Object{
			{Name: "multi", Type: sm},
			{Name: "nosuch", Type: sm},
			{Name: "/app/nosuch", Type: ps},
			{Name: "/app/str", Type: ps, FileName: "v9", Version: "9"},
			{Name: "multi", Type: sm, FileName: "badversion", Version: "00000000-0000-0000-0000-000000000000"},
		},
		errCode: codes.NotFound,
		errSubstr: []string{
			`nosuch: not found: ResourceNotFoundException (secretsmanager "nosuch" in region ` + region + `)`,
			`app_nosuch: not found: ParameterNotFound: no such parameter, version or label (ssmparameter "/app/nosuch" in region ` + region + `)`,
			`v9: not found: ParameterNotFound: no such parameter, version or label (ssmparameter "/app/str" version "9" in region ` + region + `)`,
			`badversion: not found: ResourceNotFoundException (secretsmanager "multi" version "00000000-0000-0000-0000-000000000000" in region ` + region + `)`,
		},
	}}
	s := store.New(store.Config{Endpoint: f.endpoint})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.Fetch(t.Context(), motoRequest(tt.objs))
			if tt.errCode != codes.OK {
				if status.Code(err) != tt.errCode {
					t.Fatalf("Fetch = %v (code %v), want code %v", err, status.Code(err), tt.errCode)
				}
				for _, sub := range tt.errSubstr {
					if !strings.Contains(err.Error(), sub) {
						t.Errorf("error %q does not contain %q", err, sub)
					}
				}
				for _, secret := range []string{"one", "two", "admin", "hunter2"} {
					if strings.Contains(err.Error(), secret+"\n") || strings.HasSuffix(err.Error(), " "+secret) {
						t.Errorf("error %q leaks a value", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.files, contents(res)); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			if tt.versions != nil {
				if diff := cmp.Diff(tt.versions, versions(res)); diff != "" {
					t.Errorf("versions (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestMotoMixedBatches reads more than 20 secrets and 10 parameters in one
// request, so batching, ordering and mapping back are exercised for real.
func TestMotoMixedBatches(t *testing.T) {
	f := setupMoto(t)
	var objs []spec.Object
	want := map[string]string{}
	for i := range 25 {
		objs = append(objs, spec.Object{Name: fmt.Sprintf("bulk/s%d", i), Type: spec.SecretsManager})
		want[fmt.Sprintf("bulk_s%d", i)] = fmt.Sprintf("sv%d", i)
	}
	for i := range 12 {
		objs = append(objs, spec.Object{Name: fmt.Sprintf("/bulk/p%d", i), Type: spec.SSMParameter})
		want[fmt.Sprintf("bulk_p%d", i)] = fmt.Sprintf("pv%d", i)
	}
	s := store.New(store.Config{Endpoint: f.endpoint})
	res, err := s.Fetch(t.Context(), motoRequest(objs))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, contents(res)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if len(res.Versions) != len(objs) {
		t.Errorf("%d versions for %d objects", len(res.Versions), len(objs))
	}
}

func TestMotoDeadline(t *testing.T) {
	f := setupMoto(t)
	s := store.New(store.Config{Endpoint: f.endpoint})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Fetch(ctx, motoRequest([]spec.Object{{Name: "multi", Type: spec.SecretsManager}}))
	if !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled {
		t.Errorf("Fetch with a canceled context = %v (code %v), want Canceled", err, status.Code(err))
	}
	_, err = s.Fetch(t.Context(), &store.Request{Region: region, Credentials: motoserver.Credentials()})
	if !errors.Is(err, server.ErrInvalidParameters) {
		t.Errorf("Fetch without identity = %v, want ErrInvalidParameters", err)
	}
}
