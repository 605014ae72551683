package aws_test

import (
	"errors"
	"strconv"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/provider/aws/push"
)

// parameter is the SSM parameter's decrypted value, version and type.
func (e *pushEnv) parameter(t *testing.T, name string) (value, version string, typ ssmtypes.ParameterType) {
	t.Helper()
	out, err := e.ssm.GetParameter(t.Context(), &ssm.GetParameterInput{Name: &name, WithDecryption: awssdk.Bool(true)})
	if err != nil {
		t.Fatalf("GetParameter %s: %v", name, err)
	}
	return awssdk.ToString(out.Parameter.Value), strconv.FormatInt(out.Parameter.Version, 10), out.Parameter.Type
}

// TestPushSSM: a missing parameter is created as a SecureString tagged
// with its owner; the same value at the same version is confirmed with
// one GetParameter; a new value overwrites it; a value someone else wrote
// is a conflict, kept; removal deletes only the version keymount wrote.
func TestPushSSM(t *testing.T) {
	e := newPushEnv(t)
	ssmItem := func(value string, opts ...func(*pushItem)) pushItem {
		return item("/app/url", value, append([]func(*pushItem){objectType(push.TypeSSMParameter)}, opts...)...)
	}
	res := e.push(t, ssmItem("https://a"))
	want(t, "create", res[0], created)
	value, version, typ := e.parameter(t, "/app/url")
	if value != "https://a" || version != "1" || res[0].Version != "1" || typ != ssmtypes.ParameterTypeSecureString {
		t.Fatalf("after create: %q version %s (result %s) type %s", value, version, res[0].Version, typ)
	}
	tags, err := e.ssm.ListTagsForResource(t.Context(), &ssm.ListTagsForResourceInput{
		ResourceType: ssmtypes.ResourceTypeForTaggingParameter, ResourceId: awssdk.String("/app/url")})
	if err != nil || len(tags.TagList) != 1 || awssdk.ToString(tags.TagList[0].Value) != owner {
		t.Errorf("tags %v (%v), want %s=%s", tags, err, push.OwnerTag, owner)
	}

	e.calls.counts()
	want(t, "unchanged", e.push(t, ssmItem("https://a", last("1"), same))[0], unchanged)
	if diff := cmp.Diff(map[string]int{"GetParameter": 1}, e.calls.counts()); diff != "" {
		t.Errorf("calls of an unchanged push (-want +got):\n%s", diff)
	}

	res = e.push(t, ssmItem("https://b", last("1")))
	want(t, "update", res[0], updated)
	if value, version, _ := e.parameter(t, "/app/url"); value != "https://b" || version != "2" || res[0].Version != "2" {
		t.Fatalf("after update: %q version %s (result %s)", value, version, res[0].Version)
	}

	if _, err := e.ssm.PutParameter(t.Context(), &ssm.PutParameterInput{Name: awssdk.String("/app/url"),
		Value: awssdk.String("https://theirs"), Overwrite: awssdk.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	want(t, "conflict", e.push(t, ssmItem("https://c", last("2")))[0], conflicts, `"/app/url"`, "version 3", "keymount wrote version 2")
	want(t, "remove mismatching", e.remove(t, ssmItem("", last("2")))[0], conflicts, `"/app/url"`, "version 3")
	if value, _, _ := e.parameter(t, "/app/url"); value != "https://theirs" {
		t.Fatalf("their value replaced by %q", value)
	}

	want(t, "remove matching", e.remove(t, ssmItem("", last("3")))[0], removed)
	_, err = e.ssm.GetParameter(t.Context(), &ssm.GetParameterInput{Name: awssdk.String("/app/url")})
	var nf *ssmtypes.ParameterNotFound
	if !errors.As(err, &nf) {
		t.Errorf("after removal GetParameter: %v, want ParameterNotFound", err)
	}
	want(t, "remove missing", e.remove(t, ssmItem("", last("3")))[0], removed)
	want(t, "not UTF-8", e.push(t, ssmItem("\xff\xfe"))[0], failedOut, `"/app/url"`, "UTF-8")
}
