package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What kubelet sends, spelled out here rather than taken from the driver's
// packages: the suite checks the driver against kubelet, not against itself.
const (
	driverName         = "secrets-store.csi.k8s.io"
	attrClass          = "secretProviderClass"
	attrPodName        = "csi.storage.k8s.io/pod.name"
	attrPodNamespace   = "csi.storage.k8s.io/pod.namespace"
	attrPodUID         = "csi.storage.k8s.io/pod.uid"
	attrServiceAccount = "csi.storage.k8s.io/serviceAccount.name"
	attrEphemeral      = "csi.storage.k8s.io/ephemeral"
	attrTokens         = "csi.storage.k8s.io/serviceAccount.tokens"
	// csiPluginDir is kubelet's directory of a pod's CSI volumes.
	csiPluginDir = "kubernetes.io~csi"
	// serviceAccount is the service account of every test pod.
	serviceAccount = "workload"
	// neverRuns is the image of test pods: no kubelet runs them.
	neverRuns = "registry.invalid/keymount-e2e/never-runs:0"
	// kubeletTimeout is about what kubelet gives one CSI call.
	kubeletTimeout = 2 * time.Minute
)

// secretsVolume is an inline CSI volume of the driver in a pod spec.
type secretsVolume struct {
	name  string
	class string
	// secretRef names the pod's nodePublishSecretRef Secret; "" for none.
	secretRef string
	// attributes are more volumeAttributes the pod author sets.
	attributes map[string]string
}

// createPod creates a pod bound to the node whose containers mount vols
// read-only, as a workload using keymount would.
func (n *node) createPod(t *testing.T, namespace, name string, vols ...secretsVolume) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			NodeName:           n.name,
			ServiceAccountName: serviceAccount,
			Containers:         []corev1.Container{{Name: "app", Image: neverRuns}},
		},
	}
	for _, v := range vols {
		src := &corev1.CSIVolumeSource{
			Driver:           driverName,
			ReadOnly:         ptr(true),
			VolumeAttributes: map[string]string{attrClass: v.class},
		}
		maps.Copy(src.VolumeAttributes, v.attributes)
		if v.secretRef != "" {
			src.NodePublishSecretRef = &corev1.LocalObjectReference{Name: v.secretRef}
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: v.name, VolumeSource: corev1.VolumeSource{CSI: src}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: v.name, MountPath: "/mnt/" + v.name, ReadOnly: true})
	}
	created, err := n.s.kube.CoreV1().Pods(namespace).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", namespace, name, err)
	}
	return created
}

func ptr[T any](v T) *T { return &v }

// volumeID is kubelet's ID of an inline volume: "csi-" and the hex SHA-256
// of the pod UID followed by the volume name.
func volumeID(pod *corev1.Pod, volume string) string {
	sum := sha256.Sum256([]byte(string(pod.UID) + volume))
	return "csi-" + hex.EncodeToString(sum[:])
}

// targetPath is kubelet's target path of a pod's CSI volume.
func (n *node) targetPath(pod *corev1.Pod, volume string) string {
	return filepath.Join(n.kubeletRoot, "pods", string(pod.UID), "volumes", csiPluginDir, volume, "mount")
}

// publishRequest builds the NodePublishVolume request kubelet sends for a
// pod's inline volume: it reads the CSIDriver object, mints the tokens it
// asks for with the TokenRequest API and reads the nodePublishSecretRef
// Secret. Like kubelet it creates the target's parent directory, not the
// target.
func (n *node) publishRequest(t *testing.T, pod *corev1.Pod, volume string) *csi.NodePublishVolumeRequest {
	t.Helper()
	ctx := t.Context()
	src := csiSource(t, pod, volume)
	driver, err := n.s.kube.StorageV1().CSIDrivers().Get(ctx, src.Driver, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kubelet: CSIDriver %s: %v", src.Driver, err)
	}
	vc := maps.Clone(src.VolumeAttributes)
	if driver.Spec.PodInfoOnMount != nil && *driver.Spec.PodInfoOnMount {
		vc[attrPodName] = pod.Name
		vc[attrPodNamespace] = pod.Namespace
		vc[attrPodUID] = string(pod.UID)
		vc[attrServiceAccount] = pod.Spec.ServiceAccountName
	}
	vc[attrEphemeral] = "true"
	if len(driver.Spec.TokenRequests) > 0 {
		vc[attrTokens] = n.podTokens(t, pod, driver.Spec.TokenRequests)
	}
	var secrets map[string]string
	if src.NodePublishSecretRef != nil {
		secrets = n.publishSecrets(t, pod, src.NodePublishSecretRef.Name)
	}
	target := n.targetPath(pod, volume)
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		t.Fatal(err)
	}
	return &csi.NodePublishVolumeRequest{
		VolumeId:   volumeID(pod, volume),
		TargetPath: target,
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
		Readonly:      src.ReadOnly != nil && *src.ReadOnly,
		Secrets:       secrets,
		VolumeContext: vc,
	}
}

func csiSource(t *testing.T, pod *corev1.Pod, volume string) *corev1.CSIVolumeSource {
	t.Helper()
	for _, v := range pod.Spec.Volumes {
		if v.Name == volume && v.CSI != nil {
			return v.CSI
		}
	}
	t.Fatalf("pod %s/%s has no CSI volume %q", pod.Namespace, pod.Name, volume)
	return nil
}

// podTokens mints one pod-bound token per requested audience and returns
// them as kubelet encodes them: {"<audience>": {"token", "expirationTimestamp"}}.
func (n *node) podTokens(t *testing.T, pod *corev1.Pod, requests []storagev1.TokenRequest) string {
	t.Helper()
	tokens := map[string]authenticationv1.TokenRequestStatus{}
	for _, r := range requests {
		tr, err := n.s.kube.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(t.Context(), pod.Spec.ServiceAccountName,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
				Audiences:         []string{r.Audience},
				ExpirationSeconds: r.ExpirationSeconds,
				BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
			}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("kubelet: token for pod %s/%s, audience %s: %v", pod.Namespace, pod.Name, r.Audience, err)
		}
		n.forbid(tr.Status.Token, fmt.Sprintf("the service account token of pod %s/%s", pod.Namespace, pod.Name))
		tokens[r.Audience] = tr.Status
	}
	data, err := json.Marshal(tokens)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// publishSecrets reads a nodePublishSecretRef Secret as kubelet passes it:
// its data as strings.
func (n *node) publishSecrets(t *testing.T, pod *corev1.Pod, name string) map[string]string {
	t.Helper()
	s, err := n.s.kube.CoreV1().Secrets(pod.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kubelet: nodePublishSecretRef %s/%s: %v", pod.Namespace, name, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
		n.forbid(string(v), fmt.Sprintf("value %q of nodePublishSecretRef Secret %s/%s", k, pod.Namespace, name))
	}
	return out
}

// publish calls NodePublishVolume for a pod's volume as kubelet does, with
// fresh tokens, and returns the driver's answer.
func (n *node) publish(t *testing.T, pod *corev1.Pod, volume string) error {
	t.Helper()
	req := n.publishRequest(t, pod, volume)
	ctx, cancel := context.WithTimeout(t.Context(), kubeletTimeout)
	defer cancel()
	_, err := n.csi.NodePublishVolume(ctx, req)
	return err
}

// mustPublish publishes and fails the test on an error.
func (n *node) mustPublish(t *testing.T, pod *corev1.Pod, volume string) {
	t.Helper()
	if err := n.publish(t, pod, volume); err != nil {
		t.Fatalf("NodePublishVolume of %s/%s volume %s: %v", pod.Namespace, pod.Name, volume, err)
	}
}

// unpublish calls NodeUnpublishVolume for a pod's volume and, when it
// succeeds, removes the volume's directory as kubelet does, which fails if
// the driver left the target behind.
func (n *node) unpublish(t *testing.T, pod *corev1.Pod, volume string) error {
	t.Helper()
	target := n.targetPath(pod, volume)
	ctx, cancel := context.WithTimeout(t.Context(), kubeletTimeout)
	defer cancel()
	if _, err := n.csi.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: volumeID(pod, volume), TargetPath: target}); err != nil {
		return err
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("NodeUnpublishVolume succeeded but the target %s is still there: %w", target, err)
	}
	if err := os.Remove(filepath.Dir(target)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("kubelet: removing the volume directory: %w", err)
	}
	return nil
}

// mustUnpublish unpublishes and fails the test on an error.
func (n *node) mustUnpublish(t *testing.T, pod *corev1.Pod, volume string) {
	t.Helper()
	if err := n.unpublish(t, pod, volume); err != nil {
		t.Fatalf("NodeUnpublishVolume of %s/%s volume %s: %v", pod.Namespace, pod.Name, volume, err)
	}
}

// deletePod deletes a pod as the API server and kubelet do together: a
// graceful delete marks it, kubelet unpublishes its volumes (when its node
// is alive: unpublished lists them), then kubelet removes it with a grace
// period of 0. Before that removal the test waits for the driver to delete
// the pod statuses of the unpublished volumes, which it does after
// answering: once the pod is gone the garbage collector would delete them
// too, and a test could not tell who did.
func (n *node) deletePod(t *testing.T, pod *corev1.Pod, unpublished ...string) {
	t.Helper()
	ctx := t.Context()
	pods := n.s.kube.CoreV1().Pods(pod.Namespace)
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}}); err != nil {
		t.Fatalf("delete pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	for _, v := range unpublished {
		n.mustUnpublish(t, pod, v)
		n.s.waitForStatusGone(t, pod, csiSource(t, pod, v).VolumeAttributes[attrClass], "its volume was unpublished")
	}
	err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("kubelet: remove pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// readFile reads a file of a mounted volume.
func readFile(t *testing.T, target, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(target, name))
	if err != nil {
		t.Fatalf("read %s from the volume: %v", name, err)
	}
	return string(data)
}
