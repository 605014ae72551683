package secretmirror

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	vaultapi "github.com/hashicorp/vault/api"
)

// TestDecodeKV: KV version 2's data.data with its version, version 1's
// data, a renewable lease of another engine; values decoded from base64
// as mirrors decodes them; a value that is not a string refused, naming
// its field.
func TestDecodeKV(t *testing.T) {
	v2 := &vaultapi.Secret{Data: map[string]any{
		"data":     map[string]any{"user": "app", "blob": "aGVsbG8="},
		"metadata": map[string]any{"version": json.Number("3")},
	}}
	r, err := decodeKV(v2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]byte{"user": []byte("app"), "blob": []byte("hello")}, r.data); diff != "" || r.version != 3 {
		t.Errorf("v2: version %d, data (-want +got):\n%s", r.version, diff)
	}
	if v := r.value(); v.version != "3" {
		t.Errorf("v2 parent version %q, want 3", v.version)
	}
	v1 := &vaultapi.Secret{Data: map[string]any{"password": "p@ss word"}}
	if r, err = decodeKV(v1); err != nil || string(r.data["password"]) != "p@ss word" || r.version != 0 || r.value().version != "" {
		t.Errorf("v1: %+v, %v", r, err)
	}
	leased := &vaultapi.Secret{LeaseID: "database/creds/app/abc", Renewable: true, Data: map[string]any{"username": "v-app"}}
	if r, err = decodeKV(leased); err != nil || r.leaseID != "database/creds/app/abc" {
		t.Errorf("leased: %+v, %v", r, err)
	}
	bad := &vaultapi.Secret{Data: map[string]any{"port": json.Number("5432")}}
	if _, err := decodeKV(bad); err == nil || !strings.Contains(err.Error(), `"port"`) {
		t.Errorf("a number field: %v, want an error naming it", err)
	}
}

// TestVaultErrorNamesPathRoleMessage: Vault's refusal reads as what was
// done, on which path, as whom, and Vault's own words.
func TestVaultErrorNamesPathRoleMessage(t *testing.T) {
	re := &vaultapi.ResponseError{HTTPMethod: "GET", URL: "https://vault:8200/v1/secret/data/x", StatusCode: 403, Errors: []string{"permission denied"}}
	err := vaultError("read", "secret/data/x", "Kubernetes role app (ServiceAccount shop/web)", re)
	want := "read secret/data/x as Kubernetes role app (ServiceAccount shop/web): Vault answered 403: permission denied"
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if !errors.As(err, new(*vaultapi.ResponseError)) {
		t.Error("Vault's error is not kept")
	}
	err = vaultError("log in to", "", "AppRole r-1", errors.New("dial tcp 127.0.0.1:1: connection refused"))
	if !strings.Contains(err.Error(), "log in to Vault as AppRole r-1: dial tcp") {
		t.Errorf("error %q", err)
	}
}

// TestLoginKeyHoldsNoCredential: the cache key of a login is a digest.
func TestLoginKeyHoldsNoCredential(t *testing.T) {
	k := loginKey("https://vault", "token", "hvs.secret-token")
	if strings.Contains(k, "hvs.secret-token") || k == loginKey("https://vault", "token", "hvs.other") {
		t.Errorf("key %q", k)
	}
}
