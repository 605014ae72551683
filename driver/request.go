package driver

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver/targetpath"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/classparams"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// Volume-context keys kubelet sets, and the one the pod volume sets.
const (
	AttrClass          = "secretProviderClass"
	AttrPodName        = "csi.storage.k8s.io/pod.name"
	AttrPodNamespace   = "csi.storage.k8s.io/pod.namespace"
	AttrPodUID         = "csi.storage.k8s.io/pod.uid"
	AttrServiceAccount = "csi.storage.k8s.io/serviceAccount.name"
	AttrEphemeral      = "csi.storage.k8s.io/ephemeral"
	AttrTokens         = "csi.storage.k8s.io/serviceAccount.tokens" //nolint:gosec // G101: a volume-context key name, not a credential.
)

// kubeletAttrPrefix starts every volume-context key kubelet sets itself.
const kubeletAttrPrefix = "csi.storage.k8s.io/"

// defaultFileMode is sent to providers as the JSON of the default mode.
const defaultFileMode = 0o644

// publishRequest is a validated NodePublishVolume request.
type publishRequest struct {
	volumeID       string
	targetPath     string
	target         *targetpath.Target
	readOnly       bool
	className      string
	podName        string
	podNamespace   string
	podUID         string
	serviceAccount string
	volumeContext  map[string]string
	secrets        map[string]string
	// mountGroup is the volume_mount_group kubelet sent (the pod's
	// fsGroup), as a canonical decimal; "" for none.
	mountGroup string
	// gid is mountGroup as a number, noMountGroup for none.
	gid int
}

// noMountGroup is publishRequest.gid without a volume_mount_group.
const noMountGroup = -1

// maxMountGroup is the largest group ID accepted, the largest fsGroup a pod
// may have.
const maxMountGroup = 1<<31 - 1

// parsePublishRequest checks a request before anything is touched. Errors
// name the field and the fix. The target path must be the one kubelet gives
// the pod's CSI volume below kubeletRoot.
func parsePublishRequest(req *csi.NodePublishVolumeRequest, kubeletRoot string) (*publishRequest, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, invalidf("volume ID is empty")
	case req.GetTargetPath() == "":
		return nil, invalidf("target path is empty")
	case req.GetVolumeCapability() == nil:
		return nil, invalidf("volume capability is missing")
	case req.GetVolumeCapability().GetBlock() != nil:
		return nil, invalidf("block access is not supported: secrets volumes are filesystem volumes")
	case req.GetVolumeCapability().GetMount() == nil:
		return nil, invalidf("volume capability must ask for mount access")
	case !req.GetReadonly():
		return nil, invalidf("the pod volume is not read-only: set readOnly: true in the pod's csi volume; " +
			"secrets volumes are read-only, as with the upstream driver")
	}
	vc := req.GetVolumeContext()
	p := &publishRequest{
		volumeID:       req.GetVolumeId(),
		targetPath:     req.GetTargetPath(),
		readOnly:       req.GetReadonly(),
		className:      vc[AttrClass],
		podName:        vc[AttrPodName],
		podNamespace:   vc[AttrPodNamespace],
		podUID:         vc[AttrPodUID],
		serviceAccount: vc[AttrServiceAccount],
		volumeContext:  vc,
		secrets:        req.GetSecrets(),
	}
	if err := p.parseMountGroup(req.GetVolumeCapability().GetMount().GetVolumeMountGroup()); err != nil {
		return nil, err
	}
	switch {
	case p.className == "":
		return nil, invalidf("volume attribute %s is missing: set volumeAttributes.%s in the pod's csi volume", AttrClass, AttrClass)
	case p.podName == "" || p.podNamespace == "" || p.podUID == "":
		return nil, invalidf("volume context lacks %s, %s or %s: set podInfoOnMount: true in the CSIDriver object",
			AttrPodName, AttrPodNamespace, AttrPodUID)
	}
	t, err := targetpath.Parse(kubeletRoot, p.targetPath, p.podUID)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalidRequest, err)
	}
	p.target = t
	return p, nil
}

// parseMountGroup takes the volume_mount_group kubelet sends when the
// CSIDriver's fsGroupPolicy is File and the driver has VOLUME_MOUNT_GROUP:
// the pod's fsGroup, a group ID from 0 to 2147483647 in decimal. Empty is no
// group.
func (p *publishRequest) parseMountGroup(s string) error {
	p.gid = noMountGroup
	if s == "" {
		return nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n > maxMountGroup {
		return invalidf("volume_capability.mount.volume_mount_group %s is not a group ID: "+
			"send the pod's fsGroup as a decimal number from 0 to %d, or nothing for files owned by root's group",
			quoteName(s), maxMountGroup)
	}
	p.gid = int(n)
	p.mountGroup = strconv.Itoa(p.gid)
	return nil
}

// buildMountRequest builds the provider's request exactly as the upstream
// driver does: class parameters overlaid with every volume-context key,
// the node-publish secret as a JSON object, the default mode "420". A
// volume attribute that is neither the driver's, kubelet's nor a parameter
// of the class is refused (checkVolumeAttributes).
// Service account tokens that newer kubelets put in the secrets move to the
// attributes, where providers look for them. A class that syncs Secrets
// takes no parameters from the pod (checkPodAttributes).
func buildMountRequest(c *secretsstorev1.SecretProviderClass, p *publishRequest, current []volume.Object) (*v1alpha1.MountRequest, error) {
	if err := checkPodAttributes(c, p); err != nil {
		return nil, err
	}
	if err := checkVolumeAttributes(c, p); err != nil {
		return nil, err
	}
	attrs := make(map[string]string, len(c.Spec.Parameters)+len(p.volumeContext)+1)
	for k, v := range c.Spec.Parameters {
		attrs[k] = v
	}
	for k, v := range p.volumeContext {
		attrs[k] = v
	}
	secrets := make(map[string]string, len(p.secrets))
	for k, v := range p.secrets {
		if k == AttrTokens {
			attrs[k] = v
			continue
		}
		secrets[k] = v
	}
	attrJSON, err := json.Marshal(attrs)
	if err != nil {
		return nil, fmt.Errorf("encode attributes: %w", err)
	}
	secretJSON, err := json.Marshal(secrets)
	if err != nil {
		return nil, fmt.Errorf("encode secrets: %w", err)
	}
	versions := make([]*v1alpha1.ObjectVersion, 0, len(current))
	for _, o := range current {
		versions = append(versions, &v1alpha1.ObjectVersion{Id: o.ID, Version: o.Version})
	}
	return &v1alpha1.MountRequest{
		Attributes:           string(attrJSON),
		Secrets:              string(secretJSON),
		TargetPath:           p.targetPath,
		Permission:           strconv.Itoa(defaultFileMode),
		CurrentObjectVersion: versions,
	}, nil
}

// checkPodAttributes refuses a volume whose pod would change what a class
// that syncs Secrets (spec.secretObjects) asks its provider for. Such a
// class writes Secrets that other workloads read, so a pod author who may
// not write Secrets could otherwise rewrite them through the overlay of
// the pod's volumeAttributes over the class's parameters: any
// volumeAttributes key other than secretProviderClass must then be a
// parameter of the class with the same value. Kubelet's own keys
// (csi.storage.k8s.io/*) are not the pod author's and pass. A class
// without secretObjects keeps upstream's overlay: the pod only changes
// what its own volume holds.
func checkPodAttributes(c *secretsstorev1.SecretProviderClass, p *publishRequest) error {
	if len(c.Spec.SecretObjects) == 0 {
		return nil
	}
	keys := make([]string, 0, len(p.volumeContext))
	for k := range p.volumeContext {
		if k != AttrClass && !strings.HasPrefix(k, kubeletAttrPrefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // the same key named every time
	for _, k := range keys {
		v, ok := c.Spec.Parameters[k]
		switch {
		case !ok:
			return invalidf("volume attribute %s is not a parameter of SecretProviderClass %s/%s, which syncs Secrets "+
				"(spec.secretObjects) that other workloads may read, so a pod may not add to what it fetches: "+
				"remove %s from the pod's csi volumeAttributes, or set it in the class's spec.parameters",
				quoteName(k), p.podNamespace, p.className, quoteName(k))
		case v != p.volumeContext[k]:
			return invalidf("volume attribute %s would override parameter %s of SecretProviderClass %s/%s, which syncs Secrets "+
				"(spec.secretObjects) that other workloads may read, so a pod may not change what it fetches: "+
				"remove %s from the pod's csi volumeAttributes, or use a class without secretObjects for values that differ per pod",
				quoteName(k), quoteName(k), p.podNamespace, p.className, quoteName(k))
		}
	}
	return nil
}

// checkVolumeAttributes refuses a volume attribute the driver does not
// know, so that a mistyped or made-up key never passes silently to the
// provider. The driver reads secretProviderClass; kubelet adds its own
// csi.storage.k8s.io/* keys; any other key is upstream's overlay of a class
// parameter by the pod's volumeAttributes, and must name a parameter the
// class sets (a syncing class further forbids changing it:
// checkPodAttributes), or one the class lists under
// keymount.io/ignore-parameters. The provider then judges the key as it
// judges the class's. The error names the first such key in order, never a
// value.
func checkVolumeAttributes(c *secretsstorev1.SecretProviderClass, p *publishRequest) error {
	ignored := classparams.Ignored(c.Spec.Parameters)
	for _, k := range slices.Sorted(maps.Keys(p.volumeContext)) {
		if _, param := c.Spec.Parameters[k]; param || classparams.DriverAdded(k) || ignored[k] {
			continue
		}
		return invalidf("volume attribute %s is unknown: the driver reads only volumeAttributes.%s (and kubelet's own %s* keys), "+
			"and any other key must override a parameter that SecretProviderClass %s/%s sets, which %s is not: "+
			"remove it from the pod's csi volumeAttributes, set it in the class's spec.parameters, "+
			"or list it in the class's %s parameter if it is safe to ignore",
			quoteName(k), AttrClass, kubeletAttrPrefix, p.podNamespace, p.className, quoteName(k), classparams.IgnoreKey)
	}
	return nil
}
