// Package vaultlogin keeps Vault logins, one per identity: the Vault
// provider's (one login per proven pod identity, renewed, revoked with the
// identity's last volume) and the SecretMirror Vault source's (one login
// per SecretMirror credential, replaced at 2/3 of its TTL).
//
// A Cache holds one Login per key. The caller makes the key: it names the
// address, the auth method and who logs in, and holds no credential. A
// Login's Session is its current Vault token, reused until 2/3 of its TTL;
// then the Cache's Policy says what follows:
//
//   - Renew (the provider's): the token is renewed (renew-self) while it
//     can be renewed past its end, and replaced by a new login Margin
//     before it can no longer be (not renewable, or its max TTL reached).
//     A replaced token is kept, with the leases issued under it, until
//     Revoke revokes them all (revoke-self). RenewDue renews a login in
//     use between uses. A token without a TTL never ends.
//   - Relogin (the SecretMirror source's): the token is replaced by a new
//     login and forgotten, left to run to its end; nothing is renewed. A
//     token without a TTL is due at once: every use logs in.
//
// The caller sends the login request (Kubernetes or JWT {role, jwt},
// AppRole {role_id, secret_id}) and words its errors: a Cache returns the
// login's error as it is, and ErrNoToken for an answer without a token.
// The Observer is told each request to Vault, for metrics, and each
// failure the Cache gets past, for logs.
package vaultlogin
