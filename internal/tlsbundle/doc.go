// Package tlsbundle splits a TLS object (PEM, or a PKCS#12 archive) into
// the tls.crt and tls.key of a kubernetes.io/tls Secret, as the upstream
// Secrets Store CSI driver splits them, and holds keymount's one set of PEM
// and PKCS#12 helpers (certificates, keys, chain order) for the node's
// secretObjects, keymount-controller's SecretSyncs and templates.
//
// PEM gives its CERTIFICATE blocks in order and its one private key block; other data must be a
// PKCS#12 archive without password, DER or base64 of it (as Azure Key Vault
// serves certificates), which gives the leaf then the chain. tls.key is
// encoded as upstream encodes it, whatever encoding the object used (PKCS#8,
// PKCS#1 or SEC 1 in PEM, or PKCS#12): PKCS#1 ("RSA PRIVATE KEY") for RSA,
// SEC 1 ("EC PRIVATE KEY") for ECDSA. Upstream refuses Ed25519 keys;
// keymount writes them as PKCS#8 ("PRIVATE KEY"), their only PEM encoding.
// Two differences are deliberate: an archive that does not list the leaf
// first still gives it first in tls.crt (upstream keeps the archive's order,
// the same for archives that list the leaf first), and PEM headers are
// dropped. An archive that asks for more than 1,000,000 key derivation
// iterations is refused before decoding: the cost is linear in them.
//
// Errors are fixed messages: they never carry a byte of the object, which
// is secret.
package tlsbundle
