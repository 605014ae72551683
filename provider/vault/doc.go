// Package vault is keymount's Vault and OpenBao provider: it serves the
// classes written for HashiCorp's vault-csi-provider (provider: vault, the
// same parameters, see package spec) and fixes what that provider does to
// Vault:
//
//   - One login per proven identity. Every mount's service account token is
//     proven first (internal/satoken, as the AWS provider proves it); then the
//     Vault token of that identity (Vault address and namespace, auth mount,
//     role, namespace and service account) is reused, renewed at 2/3 of its
//     TTL, replaced before it can no longer be renewed, and revoked
//     (revoke-self) once the identity's last volume is gone. Kubernetes and
//     JWT auth log in the same way ({role, jwt}). The logins are an
//     internal/vaultlogin Cache (its Renew policy), the login cache
//     SecretMirror's Vault source uses too.
//   - Leases reused. A leased answer (dynamic credentials, PKI certificates)
//     is issued once per volume, or once per workload with the class
//     parameter shareAcrossReplicas, renewed at 2/3 of its TTL when
//     renewable, and issued again only before it (or the login it was issued
//     under, which takes it along when it ends) can no longer be renewed,
//     with Config.ReissueMargin to spare. With the class parameter
//     revokeOnUnpublish, a lease no volume holds any more is revoked
//     (sys/leases/revoke) when its volume is unpublished instead of running
//     to its end.
//   - KV versions. A KV v2 object's version is its KV version: a refresh of
//     an unchanged secret reads its metadata only.
//   - Pushes. It serves keymount's push extension (server.Pusher): a
//     PushSecret's values are written into KV secrets (internal/vaultkv's
//     PutFields, the External Secrets Operator's format) with a
//     check-and-set against the version keymount wrote, logged in exactly as
//     a mount of the same attributes is (the PushSecret's ServiceAccount
//     token proven, the same login cache).
//
// keymount's driver tells the provider of every unpublish (Unpublish,
// keymount's provider extension): the volume's record goes at once, with
// what only it held. The v1alpha1 contract has no unmount call, so for the
// upstream driver, and for a keymount driver killed before it could tell,
// a volume not mounted or refreshed for Config.VolumeIdle is gone too (the
// driver refreshes every volume at least every rotation interval).
// Maintain, run every Config.MaintainEvery by Run, drops such volumes,
// renews what is due and revokes logins no volume uses; neither it nor
// Unpublish lets go of a login while a mount of its identity is in
// progress.
//
// Errors name the Vault path, the role and Vault's own message and never a
// token; Vault's 403 is PermissionDenied, 404 NotFound, a sealed or
// unreachable Vault Unavailable.
package vault
