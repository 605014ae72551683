package secretobjects

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/internal/kube"
)

// Owner references are applied by one field manager per node.
const (
	nodeManagerPrefix = NodeFieldManager + "-node-"
	// maxManagerLength is the API server's limit on a field manager name.
	maxManagerLength = 128
	// classAttribute is the volume attribute naming the class.
	classAttribute = "secretProviderClass"
)

// nodeManager is the field manager of a node's owner references:
// keymount-node-<node>, or keymount-node-<hex SHA-256 of node> when that
// would be longer than the API server allows.
func nodeManager(node string) string {
	if m := nodeManagerPrefix + node; len(m) <= maxManagerLength {
		return m
	}
	sum := sha256.Sum256([]byte(node))
	return nodeManagerPrefix + hex.EncodeToString(sum[:])
}

// owner is an object a synced Secret is owned by: an owner of a pod that
// uses the Secret (its ReplicaSet, StatefulSet, DaemonSet, Job...), or the
// pod itself when it has none.
type owner struct {
	apiVersion, kind, name string
	uid                    types.UID
}

// ownersOf returns the owners a pod gives the Secrets it uses, as the
// upstream driver does: every owner reference of the pod, without the
// controller and blockOwnerDeletion flags. A pod without owners (a bare or
// static pod) owns them itself; upstream names the pod's
// SecretProviderClassPodStatus instead, which the pod owns, so the Secret
// lives as long either way.
func ownersOf(p *corev1.Pod) []owner {
	if len(p.OwnerReferences) == 0 {
		return []owner{podOwner(p.Name, p.UID)}
	}
	owners := make([]owner, 0, len(p.OwnerReferences))
	for _, r := range p.OwnerReferences {
		owners = append(owners, owner{apiVersion: r.APIVersion, kind: r.Kind, name: r.Name, uid: r.UID})
	}
	return owners
}

func podOwner(name string, uid types.UID) owner {
	return owner{apiVersion: "v1", kind: "Pod", name: name, uid: uid}
}

// nodeOwners returns the owners of the class's Secrets on this node, sorted
// by uid: those of the pods of o.PodNamespace whose volumes use this driver
// and the class and that are not being deleted, read from the node's pod
// cache, and those of the outcome's own pod, which the cache may not have
// seen yet.
func (s *Syncer) nodeOwners(ctx context.Context, o *driver.Outcome) ([]owner, error) {
	var pods corev1.PodList
	if err := s.r.List(ctx, &pods, kube.ListOptions{Namespace: o.PodNamespace}); err != nil {
		return nil, err
	}
	var owners []owner
	var own *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case o.PodUID != "" && p.UID == types.UID(o.PodUID):
			own = p
		case p.Spec.NodeName == s.node && p.DeletionTimestamp == nil && s.usesClass(p, o.Class.Name):
			owners = append(owners, ownersOf(p)...)
		}
	}
	ownOwners, err := s.outcomeOwners(ctx, o, own)
	if err != nil {
		return nil, err
	}
	owners = append(owners, ownOwners...)
	slices.SortFunc(owners, func(a, b owner) int { return strings.Compare(string(a.uid), string(b.uid)) })
	return slices.CompactFunc(owners, func(a, b owner) bool { return a.uid == b.uid }), nil
}

// outcomeOwners returns the owners of the outcome's pod: from cached when
// the cache has it, else read live. A pod that is gone owns the Secret
// itself: the garbage collector deletes a Secret whose owners are all gone.
func (s *Syncer) outcomeOwners(ctx context.Context, o *driver.Outcome, cached *corev1.Pod) ([]owner, error) {
	if o.PodUID == "" || o.PodName == "" {
		return nil, nil
	}
	if cached != nil {
		return ownersOf(cached), nil
	}
	var p corev1.Pod
	err := s.c.Get(ctx, types.NamespacedName{Namespace: o.PodNamespace, Name: o.PodName}, &p)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && p.UID != types.UID(o.PodUID)):
		return []owner{podOwner(o.PodName, types.UID(o.PodUID))}, nil
	case err != nil:
		return nil, err
	}
	return ownersOf(&p), nil
}

// usesClass reports whether the pod has a volume of this driver with class.
func (s *Syncer) usesClass(p *corev1.Pod, class string) bool {
	for _, v := range p.Spec.Volumes {
		if v.CSI != nil && v.CSI.Driver == s.driverName && v.CSI.VolumeAttributes[classAttribute] == class {
			return true
		}
	}
	return false
}

// hasOwners reports whether refs has a reference to every owner.
func hasOwners(refs []metav1.OwnerReference, owners []owner) bool {
	for _, o := range owners {
		if !slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == o.uid }) {
			return false
		}
	}
	return true
}

// ownerReferences are the owners' references, for a create.
func ownerReferences(owners []owner) []metav1.OwnerReference {
	refs := make([]metav1.OwnerReference, 0, len(owners))
	for _, o := range owners {
		refs = append(refs, metav1.OwnerReference{APIVersion: o.apiVersion, Kind: o.kind, Name: o.name, UID: o.uid})
	}
	return refs
}

// ownerApplyConfigs are the owners' references, for an apply.
func ownerApplyConfigs(owners []owner) []ownerApply {
	refs := make([]ownerApply, 0, len(owners))
	for _, o := range owners {
		refs = append(refs, ownerApply{APIVersion: o.apiVersion, Kind: o.kind, Name: o.name, UID: o.uid})
	}
	return refs
}

// keptOwners returns the owners of cur that manager applied before: a
// node's apply keeps them, so that a node never drops an owner (a
// ReplicaSet scaled to zero, for one) and, as with the upstream driver, the
// garbage collector alone removes references to owners that are gone.
func keptOwners(cur *corev1.Secret, manager string) []owner {
	uids := appliedOwnerUIDs(cur.ManagedFields, manager)
	var owners []owner
	for _, r := range cur.OwnerReferences {
		if slices.Contains(uids, r.UID) {
			owners = append(owners, owner{apiVersion: r.APIVersion, kind: r.Kind, name: r.Name, uid: r.UID})
		}
	}
	return owners
}
