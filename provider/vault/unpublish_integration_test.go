//go:build integration && vault

package vault_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/keymountv1"
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

// testUnpublishSignal: keymount's driver telling of an unpublish, over
// the provider's socket, revokes that volume's lease then (VolumeIdle is
// far away), keeps the identity's login while another volume of it is
// mounted, and revokes the login with its last volume. A repeated or
// unknown volume is OK and revokes nothing more; a request naming no pod
// volume is refused.
func (r *rig) testUnpublishSignal(t *testing.T) {
	r.vault.Policy(t, "revoker", `path "sys/leases/revoke" { capabilities = ["update"] }`)
	r.identity(t, "signal", "app", vaultenv.Role{Policies: []string{"app", "revoker"}})
	r.vault.AWSRole(t, "app", time.Hour, 2*time.Hour)
	p := r.provider(t, vault.Config{VolumeIdle: 1000 * time.Hour})
	lc := serveLifecycle(t, p)
	ps := params("app", "- {objectName: lease, secretPath: aws/creds/app}", spec.KeyRevoke, "true")
	gone, kept := r.pod(t, "signal", "app", "gone"), r.pod(t, "signal", "app", "kept")
	goneLease := leaseOf(t, r.mustMount(t, p, mount{pod: gone, params: ps, stage: true}))
	keptLease := leaseOf(t, r.mustMount(t, p, mount{pod: kept, params: ps}))
	revokeSelfs := r.count(t, "update", "auth/token/revoke-self")

	unpublish := func(pod *corev1.Pod, volume string) error {
		uid := string(pod.UID)
		_, err := lc.Unpublish(t.Context(), &keymountv1.UnpublishRequest{PodUid: uid, VolumeName: volume,
			TargetPath: "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/" + volume + "/mount"})
		return err
	}
	if err := unpublish(gone, "vault"); err != nil {
		t.Fatalf("Unpublish: %v", err)
	}
	if r.leaseExists(t, goneLease) {
		t.Error("the unpublished volume's lease is not revoked")
	}
	if !r.leaseExists(t, keptLease) {
		t.Error("the mounted volume's lease was revoked")
	}
	if d := r.count(t, "update", "auth/token/revoke-self") - revokeSelfs; d != 0 {
		t.Errorf("%d logins revoked while a volume of the identity is mounted, want 0", d)
	}
	revokes := r.count(t, "update", "sys/leases/revoke")
	for _, v := range []string{"vault", "other"} { // again; a volume never mounted
		if err := unpublish(gone, v); err != nil {
			t.Errorf("Unpublish of %s again or unknown: %v, want OK", v, err)
		}
	}
	if d := r.count(t, "update", "sys/leases/revoke") - revokes; d != 0 {
		t.Errorf("%d leases revoked by repeated or unknown unpublishes, want 0", d)
	}
	_, err := lc.Unpublish(t.Context(), &keymountv1.UnpublishRequest{PodUid: "../" + string(kept.UID), VolumeName: "vault", TargetPath: "/x"})
	if status.Code(err) != codes.InvalidArgument || !r.leaseExists(t, keptLease) {
		t.Errorf("a request naming no pod volume: %v, want InvalidArgument and nothing revoked", err)
	}

	if err := unpublish(kept, "vault"); err != nil {
		t.Fatalf("Unpublish of the last volume: %v", err)
	}
	if d := r.count(t, "update", "auth/token/revoke-self") - revokeSelfs; d != 1 || r.leaseExists(t, keptLease) {
		t.Errorf("after the identity's last volume: %d logins revoked (want 1), its lease exists: %t (want false)", d, r.leaseExists(t, keptLease))
	}
}

// serveLifecycle serves p behind the provider kit on a real unix socket,
// as keymount-provider-vault does, and returns a client of keymount's
// extension on it, connected as the driver connects.
func serveLifecycle(t *testing.T, p *vault.Provider) keymountv1.VolumeLifecycleClient {
	t.Helper()
	srv, err := server.New(server.Config{Name: "vault", SocketDir: sockettest.Dir(t), Unpublisher: p}, p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	conn, err := grpc.NewClient("unix://"+srv.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return keymountv1.NewVolumeLifecycleClient(conn)
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
