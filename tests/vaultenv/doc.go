// Package vaultenv runs a real Vault server for the Vault test tier: HashiCorp
// Vault v1.14.2 in dev mode (in memory, unsealed) on 127.0.0.1, built once by
// hack/install-vault.sh (`make vault-env`; `make test` passes its path as
// VAULT_BIN), with what the Vault provider's tests read from:
//
//   - a file audit device (Vault.Audit), so tests count logins and issues;
//   - KV version 1 at kv1/ and KV version 2 at secret/;
//   - PKI at pki/ with a self-signed root (Vault.PKIRole adds roles);
//   - with Options.Kube, Kubernetes auth at kubernetes/ against that API
//     server (its token reviewer is a service account token from the real
//     TokenRequest API, bound to system:auth-delegator) and JWT auth at jwt/
//     trusting the API server's service account issuer keys
//     (Vault.KubernetesRole adds a role to both);
//   - with Options.AWSEndpoint (a moto_server), the AWS secrets engine at aws/,
//     whose IAM-user credentials are renewable leases (Vault.AWSRole).
//
// A test starts it, adds roles and counts requests in the audit log:
//
//	v := vaultenv.Start(t, vaultenv.Options{Kube: env, AWSEndpoint: motoserver.Start(t)})
//	v.KubernetesRole(t, vaultenv.Role{Name: "app", Namespace: "ns", ServiceAccount: "sa", Policies: []string{"read"}})
//	logins := v.Audit(t).Count("update", "auth/kubernetes/login")
//
// A Vault that cannot start fails the test, it never skips. The server is
// stopped when the test ends.
package vaultenv
