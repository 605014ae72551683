// Package secretobjects mirrors the files of a mounted volume into the
// Kubernetes Secrets a SecretProviderClass lists in spec.secretObjects.
//
// # Writes
//
// A Secret keymount creates is created in one request (a create, which
// fails when the Secret exists) with its content, its content stamp and
// this node's owner references: it has an owner from its first moment, so
// no failure can leave it without one. The first write after it hands the
// create's fields to the managers below, as if they had applied them (the
// managed fields are written as such: the API server takes them as
// written), before it applies anything; until then the create's entry
// counts as keymount's apply entry. A Secret that never changes thus costs
// one write, its create.
//
// Every later write is a server-side apply, with force:
//
//   - field manager "keymount" (NodeFieldManager): type, the data keys of the
//     class, the class's labels plus secrets-store.csi.k8s.io/managed=true
//     (ManagedLabel) and its annotations plus
//     keymount.io/secretproviderclass=<class> (ClassAnnotation), and the
//     content stamp. Every node applies the same content, so they share this
//     manager. It applies to the Secret as read, its uid and resourceVersion:
//     a Secret that changed since is read again and decided anew.
//   - field manager "keymount-node-<node>": only metadata.ownerReferences,
//     this node's owners plus every owner it applied before. ownerReferences
//     is a list keyed by uid, so the references of each node's manager are
//     merged and a node never removes another node's owners. It applies to
//     the Secret's uid: it never creates a Secret.
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
// skipped when its part is current. A newer answer with the same content
// writes nothing either: the stamp changes only with the content.
//
// # Lifetime
//
// As with the upstream driver, a synced Secret is owned by the owners of the
// pods that use it: a pod's every owner reference (its ReplicaSet,
// StatefulSet, DaemonSet, Job...), without the controller and
// blockOwnerDeletion flags, and the pod itself when it has no owner (upstream
// then names the pod's SecretProviderClassPodStatus, which the pod owns). So
// a Deployment scaled to zero or rolled out with Recreate keeps its Secret
// while a ReplicaSet that used it exists. keymount never removes an owner
// reference: the API server's garbage collector drops a reference to an
// owner that is gone and deletes the Secret once no owner is left.
//
// # Content stamp
//
// Each node syncs from its own volume, whose content is the provider's answer
// at the volume's last successful refresh. The Secret records when that
// answer came and from which node: keymount.io/content-time (RFC 3339, UTC)
// and keymount.io/content-node. New content replaces the Secret's only when
// its answer is not older, from the same node, or at least DefaultSettle (2m)
// later, from another node. Object versions cannot order answers: they are
// opaque (an AWS version id says nothing of its age) and may come back (a
// secret moved back to an older version). An answer less than DefaultSettle
// later may come from a provider's cache older than the Secret's content
// (keymount's AWS provider shares a value for 30s by default), so within that
// window the first answer synced stays and a later refresh replaces it. A
// stamp is never taken as later than the write that recorded it (by the API
// server's clock), so a node whose clock runs ahead cannot hold a Secret
// longer. A Secret keymount keeps this way reports SecretsSynced True with
// reason ContentKept, saying whose content it holds.
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
// their object as the upstream driver splits them (package
// internal/tlsbundle, which keymount-controller's SecretSyncs share). Other
// keys, and other Secret types, get the object's bytes as they are.
//
// # Secrets
//
// File contents go only into the applied Secrets: never into conditions,
// events, errors or logs, which name Secrets, classes, objects, keys and
// file names.
package secretobjects
