package secretsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/driver"
)

// Owner references are applied by one field manager per node.
const (
	nodeManagerPrefix = FieldManager + "-node-"
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

// podOwner is a pod that owns the Secrets of its class.
type podOwner struct {
	name string
	uid  types.UID
}

// nodeOwners returns the pods of this node that use the outcome's class,
// sorted by uid: the pods of o.PodNamespace whose volumes use this driver
// and the class and that are not being deleted, read from the node's pod
// cache, plus the outcome's own pod, which the cache may not have seen yet.
func (s *Syncer) nodeOwners(ctx context.Context, o *driver.Outcome) ([]podOwner, error) {
	var pods corev1.PodList
	if err := s.r.List(ctx, &pods, client.InNamespace(o.PodNamespace)); err != nil {
		return nil, err
	}
	var owners []podOwner
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == s.node && p.DeletionTimestamp == nil && s.usesClass(p, o.Class.Name) {
			owners = append(owners, podOwner{name: p.Name, uid: p.UID})
		}
	}
	if o.PodUID != "" && o.PodName != "" {
		owners = append(owners, podOwner{name: o.PodName, uid: types.UID(o.PodUID)})
	}
	slices.SortFunc(owners, func(a, b podOwner) int { return strings.Compare(string(a.uid), string(b.uid)) })
	return slices.CompactFunc(owners, func(a, b podOwner) bool { return a.uid == b.uid }), nil
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

// hasOwners reports whether refs (owner reference uids) has every owner.
func hasOwners(refs []types.UID, owners []podOwner) bool {
	for _, o := range owners {
		if !slices.Contains(refs, o.uid) {
			return false
		}
	}
	return true
}

// ownerReferences are the apply configurations of the owners' references.
func ownerReferences(owners []podOwner) []*metav1ac.OwnerReferenceApplyConfiguration {
	refs := make([]*metav1ac.OwnerReferenceApplyConfiguration, 0, len(owners))
	for _, o := range owners {
		refs = append(refs, metav1ac.OwnerReference().
			WithAPIVersion("v1").WithKind("Pod").WithName(o.name).WithUID(o.uid).
			WithController(false).WithBlockOwnerDeletion(false))
	}
	return refs
}
