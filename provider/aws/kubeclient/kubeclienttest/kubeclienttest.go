// Package kubeclienttest serves the provider's Kubernetes reads from a
// client-go clientset (client-go's fake, with its reactors), for tests.
package kubeclienttest

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Clientset reads through a clientset what *kubeclient.Client reads from
// the API server.
type Clientset struct {
	kubernetes.Interface
}

// Wrap returns c's reads as the provider makes them.
func Wrap(c kubernetes.Interface) Clientset { return Clientset{Interface: c} }

// GetServiceAccount reads the service account namespace/name.
func (c Clientset) GetServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	return c.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
}

// GetNode reads the node name.
func (c Clientset) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	return c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// GetPod reads the pod namespace/name.
func (c Clientset) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return c.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}
