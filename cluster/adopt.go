package cluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

// UpstreamMounted reports whether the API server holds the pod status the
// upstream Secrets Store CSI Driver wrote for this pod's volume of class at
// targetPath, saying it is mounted: the proof that a tmpfs at that target
// is a volume the upstream driver published before the switch.
func (c *Cluster) UpstreamMounted(ctx context.Context, podNamespace, podName, className, targetPath string) (bool, error) {
	st := &secretsstorev1.SecretProviderClassPodStatus{}
	key := types.NamespacedName{Namespace: podNamespace, Name: podName + "-" + podNamespace + "-" + className}
	if err := c.live.Get(ctx, key, st); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("read the pod status %s: %w", key, err)
	}
	return st.Status.Mounted && st.Status.TargetPath == targetPath && st.Status.PodName == podName &&
		st.Status.SecretProviderClassName == className, nil
}
