package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/keymount/keymount/internal/metrics"
)

func TestAWSMetrics(t *testing.T) {
	m := metrics.NewAWS()
	m.StoreCall("Secrets Manager", "BatchGetSecretValue", "ok", 20*time.Millisecond)
	m.StoreCall("Secrets Manager", "BatchGetSecretValue", "ok", 30*time.Millisecond)
	m.StoreCall("SSM", "GetParameters", "ThrottlingException", time.Second)
	m.CacheLookup(true)
	m.CacheLookup(true)
	m.CacheLookup(false)
	m.CredentialRequest("sts", false, 200*time.Millisecond)
	m.CredentialRequest("sts", true, time.Second)
	m.CredentialRequest("made-up", true, time.Second) // not a source: not counted
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`keymount_aws_store_requests_total{operation="BatchGetSecretValue",outcome="ok",service="Secrets Manager"} 2`,
		`keymount_aws_store_requests_total{operation="GetParameters",outcome="ThrottlingException",service="SSM"} 1`,
		`keymount_aws_store_request_duration_seconds_count{operation="BatchGetSecretValue",service="Secrets Manager"} 2`,
		`keymount_aws_cache_lookups_total{result="hit"} 2`,
		`keymount_aws_cache_lookups_total{result="miss"} 1`,
		`keymount_aws_credential_requests_total{result="ok",source="sts"} 1`,
		`keymount_aws_credential_requests_total{result="error",source="sts"} 1`,
		`keymount_aws_credential_requests_total{result="error",source="pod_identity"} 0`,
		`keymount_aws_credential_request_duration_seconds_count{source="sts"} 2`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	if strings.Contains(string(body), "made-up") {
		t.Error("a source outside the fixed set got a series")
	}
}
