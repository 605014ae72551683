// Package secretsync mirrors the files of a mounted volume into the
// Kubernetes Secrets a SecretProviderClass lists in spec.secretObjects.
//
// # Writes
//
// A Secret is written with server-side apply only, in two applies:
//
//   - field manager "keymount" (FieldManager), with force: type, the data
//     keys of the class, the class's labels plus
//     secrets-store.csi.k8s.io/managed=true (ManagedLabel) and its annotations
//     plus keymount.io/secretproviderclass=<class> (ClassAnnotation). Every
//     node applies the same content, so they share this manager.
//   - field manager "keymount-node-<node>", with force: only
//     metadata.ownerReferences, one per pod on this node that uses the class
//     (controller and blockOwnerDeletion false). ownerReferences is a list
//     keyed by uid, so the references of each node's manager are merged and
//     a node never removes another node's pods.
//
// Labels, annotations, data keys and owner references written by other
// managers are never touched; a data key, label or annotation keymount wrote
// before and the class no longer lists is removed by the next apply, as
// server-side apply does for fields a manager stops applying.
//
// Nothing is written when the Secret already matches: the cached Secret is
// compared with the desired type, data, labels and annotations (as a subset,
// plus what the Secret's managedFields say keymount applied before and no
// longer wants; a cache that strips managedFields delays such a removal to
// the next write) and with this node's owner references, and each apply is
// skipped when its part is current.
//
// # Lifetime
//
// A synced Secret lives as long as a pod that uses it: every such pod is an
// owner. keymount never removes an owner reference itself. When a pod is
// deleted, the API server's garbage collector drops the dangling reference
// from the Secret, and deletes the Secret once no owner is left. A node's
// apply also drops the references it wrote for pods that are no longer on
// the node, but only when it has something else to apply.
//
// # What keymount refuses to write
//
//   - An existing Secret without ManagedLabel: keymount never adopts a Secret
//     it did not create (SecretNotManaged). A Secret the upstream Secrets
//     Store CSI driver created carries the same label and is adopted.
//   - A Secret whose ClassAnnotation names another class of the namespace
//     that still exists and still lists it: the first claimant keeps it
//     (SecretClaimedByOtherClass), and a Warning event is emitted once per
//     Secret and class until that is resolved. A claim by a class that was
//     deleted or no longer lists the Secret is taken over.
//   - A Secret of another type: the type of a Secret cannot change
//     (SecretTypeMismatch).
//
// # Reads
//
// The Syncer reads Secrets and Pods through a node-scoped cache: Secrets with
// ManagedLabel only, Pods of this node only (never a cluster-wide Secret
// watch). A Secret missing from the cache is read live once to tell a Secret
// that does not exist from one keymount must not touch. The class that
// claims a Secret is read live, only when the claim names another class.
//
// # TLS
//
// For a kubernetes.io/tls Secret the keys tls.crt and tls.key are split from
// their object as the upstream driver splits them. PEM gives its CERTIFICATE
// blocks in order and its one private key block; other data must be a
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
// iterations is refused before decoding: the cost is linear in them. Other
// keys, and other Secret types, get the object's bytes as they are.
//
// # Secrets
//
// File contents go only into the applied Secrets: never into conditions,
// events, errors or logs, which name Secrets, classes, objects, keys and
// file names.
package secretsync
