package cluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/kube"
)

// diagnose lists each watched type once, as its informer does, and logs why
// a list fails: for a Forbidden answer, the RBAC rule the driver's
// ClusterRole lacks.
func diagnose(ctx context.Context, cfg Config, live kube.Reader) {
	for _, w := range watched(cfg) {
		list, res := listFor(w.Object)
		opts := w.ListOptions()
		opts.Limit = 1
		err := live.List(ctx, list, opts)
		switch {
		case err == nil:
			klog.InfoS("API caches not synced yet, but listing works", "resource", res.String())
		case apierrors.IsForbidden(err):
			klog.ErrorS(err, "API caches cannot sync: RBAC rule missing", "resource", res.String(),
				"fix", fmt.Sprintf("grant the driver's service account get, list and watch on %s in its ClusterRole", ruleName(res)))
		default:
			klog.ErrorS(err, "API caches cannot sync", "resource", res.String())
		}
	}
}

// ruleName names a resource as an RBAC rule does: resource.group.
func ruleName(res schema.GroupResource) string {
	if res.Group == "" {
		return res.Resource + ` (apiGroups: [""])`
	}
	return fmt.Sprintf("%s (apiGroups: [%q])", res.Resource, res.Group)
}

// listFor returns an empty list of obj's type and its resource.
func listFor(obj kube.Object) (kube.ObjectList, schema.GroupResource) {
	switch obj.(type) {
	case *secretsstorev1.SecretProviderClass:
		return &secretsstorev1.SecretProviderClassList{}, secretsstorev1.SchemeGroupVersion.WithResource("secretproviderclasses").GroupResource()
	case *secretsstorev1.SecretProviderClassPodStatus:
		return &secretsstorev1.SecretProviderClassPodStatusList{},
			secretsstorev1.SchemeGroupVersion.WithResource("secretproviderclasspodstatuses").GroupResource()
	case *corev1.Secret:
		return &corev1.SecretList{}, schema.GroupResource{Resource: "secrets"}
	}
	return &corev1.PodList{}, schema.GroupResource{Resource: "pods"}
}
