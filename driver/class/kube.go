package class

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/kube"
)

// KubeResolver reads classes from the API server: from an informer cache
// first, and with a live GET when the cache does not have the class yet, so
// a class created together with its pod is found (upstream #1436).
type KubeResolver struct {
	cache kube.Reader
	live  kube.Reader
}

var _ Resolver = (*KubeResolver)(nil)

// NewKubeResolver returns a resolver reading cache first and live on a miss.
func NewKubeResolver(cache, live kube.Reader) *KubeResolver {
	return &KubeResolver{cache: cache, live: live}
}

// Resolve returns the class named name in namespace.
func (r *KubeResolver) Resolve(ctx context.Context, namespace, name string) (*secretsstorev1.SecretProviderClass, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	spc := &secretsstorev1.SecretProviderClass{}
	err := r.cache.Get(ctx, key, spc)
	if apierrors.IsNotFound(err) {
		err = r.live.Get(ctx, key, spc)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: %q in namespace %q: create it, or fix volumeAttributes.secretProviderClass", ErrNotFound, name, namespace)
	case err != nil:
		return nil, fmt.Errorf("get secretproviderclass %s/%s: %w", namespace, name, err)
	}
	if spc.Spec.Provider == "" {
		return nil, fmt.Errorf("%w: %s/%s: spec.provider is empty: name the provider plugin, such as aws or local", ErrInvalid, namespace, name)
	}
	return spc, nil
}
