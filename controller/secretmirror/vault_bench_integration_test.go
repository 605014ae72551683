//go:build integration && vault

package secretmirror_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/controller/push"
	"github.com/keymount/keymount/tests/poll"
	"github.com/keymount/keymount/tests/vaultenv"
)

// BenchmarkVaultDestination measures what SecretMirrors with a Vault
// destination cost Vault: 20 SecretMirrors, each pushing its own Secret to
// its own KV version 2 path with one shared AppRole login (mirrors'
// auth.approle), polled every second, against a real Vault and API server.
// It reports, per SecretMirror and poll of unchanged Secrets, the value
// reads, writes and logins Vault saw (its audit log; a poll is one metadata
// read of one SecretMirror), and
// the time from 20 Secret changes to their 20 new versions in Vault:
//
//	VAULT_BIN=... KUBEBUILDER_ASSETS=... go test -tags integration,vault -run '^$' -bench VaultDestination -benchtime 1x ./controller/secretmirror/
func BenchmarkVaultDestination(b *testing.B) {
	const mirrors, polls = 20, 5
	for b.Loop() {
		f := startOwnFixture(b)
		v := vaultenv.Start(b, vaultenv.Options{})
		v.Policy(b, "bench-push", `path "secret/data/bench/*" { capabilities = ["create", "update", "read"] }
path "secret/metadata/bench/*" { capabilities = ["read", "update"] }`)
		v.Write(b, "sys/auth/approle", map[string]any{"type": "approle"})
		v.Write(b, "auth/approle/role/bench", map[string]any{"token_policies": "bench-push", "token_ttl": "1h"})
		rid, err := v.Client.Logical().ReadWithContext(b.Context(), "auth/approle/role/bench/role-id")
		if err != nil || rid == nil {
			b.Fatalf("role-id: %v", err)
		}
		sid := v.Write(b, "auth/approle/role/bench/secret-id", map[string]any{})
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}
		if err := f.c.Create(b.Context(), ns); err != nil {
			b.Fatal(err)
		}
		creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "vault-approle"},
			StringData: map[string]string{"role-id": fmt.Sprint(rid.Data["role_id"]), "secret-id": fmt.Sprint(sid.Data["secret_id"])}}
		if err := f.c.Create(b.Context(), creds); err != nil {
			b.Fatal(err)
		}
		sources := make([]*corev1.Secret, mirrors)
		for i := range mirrors {
			sources[i] = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("s%d", i)},
				Data: map[string][]byte{"password": []byte("one"), "user": []byte("app")}}
			m := &mirrorsv1alpha2.SecretMirror{
				ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: sources[i].Name},
				Spec: mirrorsv1alpha2.SecretMirrorSpec{
					Source: mirrorsv1alpha2.SecretMirrorSource{Name: sources[i].Name},
					Destination: mirrorsv1alpha2.SecretMirrorDestination{Type: mirrorsv1alpha2.DestinationTypeVault, Vault: &mirrorsv1alpha2.VaultSpec{
						Addr: v.Addr, Path: "secret/data/bench/" + sources[i].Name,
						Auth: &mirrorsv1alpha2.VaultAuth{AppRole: &mirrorsv1alpha2.VaultAppRoleAuth{SecretRef: &corev1.SecretReference{Name: "vault-approle"}}}}},
					PollPeriodSeconds: 1,
				},
			}
			if err := f.c.Create(b.Context(), sources[i]); err != nil {
				b.Fatal(err)
			}
			if err := f.c.Create(b.Context(), m); err != nil {
				b.Fatal(err)
			}
		}
		f.waitMetric(b, push.MetricWrites, map[string]string{"store": "vault-kv2", "result": "created"}, mirrors)
		a := v.Audit(b)
		reads, meta, writes, logins := a.Count("read", "secret/data/bench/"), a.Count("read", "secret/metadata/bench/"), a.Count("update", "secret/data/bench/"), a.Count("update", "auth/approle/login")
		poll.Until(b, fmt.Sprintf("%d polls of %d unchanged SecretMirrors", polls, mirrors), func(context.Context) (bool, error) {
			return v.Audit(b).Count("read", "secret/metadata/bench/") >= meta+polls*mirrors, nil
		})
		a = v.Audit(b)
		n := float64(a.Count("read", "secret/metadata/bench/") - meta)
		b.ReportMetric(float64(a.Count("read", "secret/data/bench/")-reads)/n, "value-reads/poll")
		b.ReportMetric(float64(a.Count("update", "secret/data/bench/")-writes)/n, "writes/poll")
		b.ReportMetric(float64(a.Count("update", "auth/approle/login")-logins)/n, "logins/poll")
		b.ReportMetric(float64(a.Count("update", "auth/approle/login")), "logins-total")

		start := time.Now()
		for _, s := range sources {
			s.Data["password"] = []byte("two")
			if err := f.c.Update(b.Context(), s); err != nil {
				b.Fatal(err)
			}
		}
		f.waitMetric(b, push.MetricWrites, map[string]string{"store": "vault-kv2", "result": "updated"}, mirrors)
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "change-to-vault-ms")
		b.ReportMetric(float64(v.Audit(b).Count("update", "secret/data/bench/")-a.Count("update", "secret/data/bench/"))/mirrors, "writes/change")
	}
}
