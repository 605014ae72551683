package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/tests/motoserver"
)

// TestMotoListRevalidates: against moto, 25 "latest" objects by name, one
// by ARN and one by staging label, each in its own Fetch call, are
// revalidated after the freshness window by one ListSecrets; a new current
// version is read in a batch, a moved label with GetSecretValue.
func TestMotoListRevalidates(t *testing.T) {
	f := setupMoto(t)
	sm := secretsmanager.New(secretsmanager.Options{Region: region, BaseEndpoint: aws.String(f.endpoint), Credentials: motoserver.Credentials()})
	desc, err := sm.DescribeSecret(t.Context(), &secretsmanager.DescribeSecretInput{SecretId: aws.String("json")})
	if err != nil {
		t.Fatal(err)
	}
	objs := []spec.Object{
		{Name: aws.ToString(desc.ARN), Type: spec.SecretsManager, FileName: "json"},
		{Name: "multi", Type: spec.SecretsManager, FileName: "blue", VersionLabel: "blue"},
	}
	for i := range 25 {
		objs = append(objs, spec.Object{Name: fmt.Sprintf("bulk/s%d", i), Type: spec.SecretsManager})
	}
	clk := clocktesting.NewFakeClock(time.Now())
	hc := &countingClient{calls: map[string]int{}}
	s := store.New(store.Config{Endpoint: f.endpoint, Clock: clk, HTTPClient: hc})
	fetch := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, o := range objs {
			res, err := s.Fetch(t.Context(), motoRequest([]spec.Object{o}))
			if err != nil {
				t.Fatalf("%s: %v", o.Name, err)
			}
			for k, v := range contents(res) {
				out[k] = v
			}
		}
		return out
	}
	fetch()
	wantCalls(t, hc.take(), map[string]int{"secretsmanager.BatchGetSecretValue": 26, "secretsmanager.GetSecretValue": 1})

	clk.Step(store.DefaultFreshness)
	got := fetch()
	wantCalls(t, hc.take(), map[string]int{"secretsmanager.ListSecrets": 1})
	if got["bulk_s3"] != "sv3" || got["blue"] != "two" || got["json"] == "" {
		t.Errorf("bulk_s3 = %q, blue = %q, json = %q; want sv3, two and the JSON document", got["bulk_s3"], got["blue"], got["json"])
	}

	if _, err := sm.PutSecretValue(t.Context(), &secretsmanager.PutSecretValueInput{SecretId: aws.String("bulk/s3"), SecretString: aws.String("sv3 again")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.UpdateSecretVersionStage(t.Context(), &secretsmanager.UpdateSecretVersionStageInput{
		SecretId: aws.String("multi"), VersionStage: aws.String("blue"),
		MoveToVersionId: aws.String(f.v1), RemoveFromVersionId: aws.String(f.v2),
	}); err != nil {
		t.Fatal(err)
	}
	clk.Step(store.DefaultFreshness)
	got = fetch()
	wantCalls(t, hc.take(), map[string]int{"secretsmanager.ListSecrets": 1, "secretsmanager.BatchGetSecretValue": 1, "secretsmanager.GetSecretValue": 1})
	if got["bulk_s3"] != "sv3 again" || got["blue"] != "one" || got["bulk_s4"] != "sv4" {
		t.Errorf("bulk_s3 = %q, blue = %q, bulk_s4 = %q; want sv3 again, one and sv4", got["bulk_s3"], got["blue"], got["bulk_s4"])
	}
}
