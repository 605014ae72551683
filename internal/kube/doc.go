// Package kube is the node driver's Kubernetes client: REST clients of the
// few resources it reads and writes (pods, Secrets and events of core/v1,
// keymount's SecretProviderClasses and SecretProviderClassPodStatuses, and
// the SecretSyncs keymount-controller serves), node-scoped informer caches
// over them, and an event sink for client-go's event recorder.
//
// It links only core/v1 and keymount's API. client-go's clientset and
// controller-runtime's client and cache link every API group of Kubernetes
// (client-go's scheme registers all of them at start-up), which cost the
// driver about 25 MiB of resident text and most of its start-up time.
//
// Consumers depend on the narrow Reader and Writer interfaces; API
// implements both against the API server and Cache implements Reader over
// informers. Errors are apimachinery's (apierrors), as client-go returns
// them.
package kube
