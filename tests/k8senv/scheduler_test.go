package k8senv_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/keymount/keymount/tests/poll"
)

// schedulerTaint keeps every pod but the scheduler test's own off the node
// it creates: the other subtests' pods stay unscheduled, so deleting one
// needs no kubelet to confirm it.
var schedulerTaint = corev1.Taint{Key: "k8senv.test/scheduler", Value: "only", Effect: corev1.TaintEffectNoSchedule}

// testScheduler registers a Ready Node with room for pods (no kubelet runs:
// the Node is only an object) and waits for kube-scheduler to bind a Pod
// created without spec.nodeName to it.
func testScheduler(t *testing.T, client kubernetes.Interface) {
	ctx := t.Context()
	node := createReadyNode(t, client, "node-1")
	pod, err := client.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "scheduled"},
		Spec: corev1.PodSpec{
			ServiceAccountName: serviceAccount,
			Tolerations:        []corev1.Toleration{{Key: schedulerTaint.Key, Operator: corev1.TolerationOpEqual, Value: schedulerTaint.Value, Effect: schedulerTaint.Effect}},
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.invalid/app:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("100m"),
					corev1.ResourceMemory: resource.MustParse("64Mi"),
				}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Pod: %v", err)
	}
	if pod.Spec.NodeName != "" {
		t.Fatalf("Pod %s was created bound to %q: the test proves nothing", pod.Name, pod.Spec.NodeName)
	}

	got, lastErr := pod, error(nil)
	err = poll.Wait(ctx, eventually, func(ctx context.Context) (bool, error) {
		// An error is retried until the deadline, then reported.
		p, err := client.CoreV1().Pods(namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		lastErr = err
		if err == nil {
			got = p
		}
		return err == nil && got.Spec.NodeName != "", nil
	})
	if err != nil {
		t.Fatalf("Pod %s was not bound to a node within %s: %v (last error %v; conditions %+v)", pod.Name, eventually, err, lastErr, got.Status.Conditions)
	}
	if got.Spec.NodeName != node.Name {
		t.Errorf("Pod %s was bound to %q, want %q", pod.Name, got.Spec.NodeName, node.Name)
	}
}

// createReadyNode creates a Node tainted with schedulerTaint, sets its
// status, through the status subresource, to Ready with room for pods, and
// does what node-lifecycle-controller (not run here) does for a Ready node:
// it removes the node.kubernetes.io/not-ready:NoSchedule taint that
// admission (TaintNodesByCondition) puts on every new Node.
func createReadyNode(t *testing.T, client kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	ctx := t.Context()
	node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{schedulerTaint}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Node %s: %v", name, err)
	}
	room := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("4Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	now := metav1.Now()
	node.Status = corev1.NodeStatus{
		Capacity:    room,
		Allocatable: room,
		Conditions: []corev1.NodeCondition{{
			Type:               corev1.NodeReady,
			Status:             corev1.ConditionTrue,
			Reason:             "KubeletReady",
			LastHeartbeatTime:  now,
			LastTransitionTime: now,
		}},
	}
	node, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("setting the status of Node %s: %v", name, err)
	}
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(taint corev1.Taint) bool {
		return taint.Key == corev1.TaintNodeNotReady
	})
	node, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("removing the not-ready taint of Node %s: %v", name, err)
	}
	if !slices.Equal(node.Spec.Taints, []corev1.Taint{schedulerTaint}) {
		t.Fatalf("Node %s has taints %v, want only %v", name, node.Spec.Taints, schedulerTaint)
	}
	return node
}
