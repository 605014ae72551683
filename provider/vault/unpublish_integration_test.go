//go:build integration && vault

package vault_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/provider/vault"
	"github.com/keymount/keymount/provider/vault/spec"
	"github.com/keymount/keymount/tests/vaultenv"
)

// testRevokeOnUnpublish: with revokeOnUnpublish, the lease of a volume
// the provider learns is unpublished (not refreshed for VolumeIdle) is
// revoked at once, while another volume of the identity keeps the login
// (and its own lease) alive; without it, the lease runs to its end.
func (r *rig) testRevokeOnUnpublish(t *testing.T) {
	r.vault.Policy(t, "revoker", `path "sys/leases/revoke" { capabilities = ["update"] }`)
	r.identity(t, "unpub", "app", vaultenv.Role{Policies: []string{"app", "revoker"}})
	r.vault.AWSRole(t, "app", time.Hour, 2*time.Hour)
	for i, tc := range []struct {
		name   string
		revoke string
	}{{"revokeOnUnpublish", "true"}, {"without it", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktesting.NewFakeClock(time.Now())
			p := r.provider(t, vault.Config{Clock: clock})
			ps := params("app", "- {objectName: lease, secretPath: aws/creds/app}", spec.KeyRevoke, tc.revoke)
			gone := r.pod(t, "unpub", "app", []string{"gone-1", "gone-2"}[i])
			kept := r.pod(t, "unpub", "app", []string{"kept-1", "kept-2"}[i])
			goneLease := leaseOf(t, r.mustMount(t, p, mount{pod: gone, params: ps}))
			keptLease := leaseOf(t, r.mustMount(t, p, mount{pod: kept, params: ps}))
			revokes, revokeSelfs := r.count(t, "update", "sys/leases/revoke"), r.count(t, "update", "auth/token/revoke-self")

			clock.Step(vault.DefaultVolumeIdle * 6 / 10)
			r.mustMount(t, p, mount{pod: kept, params: ps}) // the kept volume's refresh
			clock.Step(vault.DefaultVolumeIdle * 5 / 10)    // gone: idle for 1.1 × VolumeIdle
			p.Maintain(t.Context())

			wantRevokes := map[string]int{"true": 1, "": 0}[tc.revoke]
			if d := r.count(t, "update", "sys/leases/revoke") - revokes; d != wantRevokes {
				t.Errorf("%d leases revoked, want %d", d, wantRevokes)
			}
			if d := r.count(t, "update", "auth/token/revoke-self") - revokeSelfs; d != 0 {
				t.Errorf("%d logins revoked while a volume of the identity is mounted, want 0", d)
			}
			if exists := r.leaseExists(t, goneLease); exists != (tc.revoke == "") {
				t.Errorf("the unpublished volume's lease exists: %t, want %t", exists, tc.revoke == "")
			}
			if !r.leaseExists(t, keptLease) {
				t.Error("the mounted volume's lease was revoked")
			}
		})
	}
}

// leaseOf is the lease ID of a whole-answer file (no secretKey).
func leaseOf(t *testing.T, res *server.MountResult) string {
	t.Helper()
	var a struct {
		LeaseID string `json:"lease_id"`
	}
	if err := json.Unmarshal(res.Files[0].Contents, &a); err != nil || a.LeaseID == "" {
		t.Fatalf("no lease id in the whole answer: %v", err)
	}
	return a.LeaseID
}

// leaseExists looks the lease up as root: Vault answers 400 "invalid
// lease" for one that is gone.
func (r *rig) leaseExists(t *testing.T, id string) bool {
	t.Helper()
	_, err := r.vault.Client.Sys().LookupWithContext(t.Context(), id)
	var re *vaultapi.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusBadRequest {
		return false
	}
	if err != nil {
		t.Fatalf("lease lookup: %v", err)
	}
	return true
}

// testSecretSyncsOfTwoIdentities: SecretSyncs are all sent with the target
// /mnt/secrets-store; the syncs of one class by two service accounts of a
// namespace keep both logins (and their leases) in use, the later never
// replacing the earlier's record.
func (r *rig) testSecretSyncsOfTwoIdentities(t *testing.T) {
	r.vault.AWSRole(t, "app", time.Hour, 2*time.Hour)
	sas := []string{"sync-a", "sync-b"}
	for _, sa := range sas {
		r.identity(t, "syncs", sa, vaultenv.Role{})
	}
	p := r.provider(t, vault.Config{})
	revokeSelfs := r.count(t, "update", "auth/token/revoke-self")
	var leases []string
	for _, sa := range sas {
		res := r.mustMount(t, p, mount{pod: r.pod(t, "syncs", sa, "controller-"+sa), target: "/mnt/secrets-store",
			params: params(sa, "- {objectName: lease, secretPath: aws/creds/app}")})
		leases = append(leases, leaseOf(t, res))
	}
	p.Maintain(t.Context())
	if d := r.count(t, "update", "auth/token/revoke-self") - revokeSelfs; d != 0 {
		t.Errorf("%d logins revoked while both identities' SecretSyncs are in use, want 0", d)
	}
	for i, l := range leases {
		if !r.leaseExists(t, l) {
			t.Errorf("the lease of %s's SecretSync was revoked", sas[i])
		}
	}
}
