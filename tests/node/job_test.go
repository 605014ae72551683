package node_test

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keymount/keymount/tests/nodeenv"
	"github.com/keymount/keymount/tests/poll"
)

// runJob runs a Job named name whose one pod (no retry) runs the probe
// with args and a volume of class, waits until it finishes, fails the test
// unless it completed, and returns what its container printed.
func runJob(t *testing.T, n *nodeenv.Node, ns, name, class string, args ...string) []string {
	t.Helper()
	tmpl := n.ProbePod(ns, "", args...)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	withVolume(&tmpl.Spec, class)
	backoff := int32(0)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			Template:     corev1.PodTemplateSpec{Spec: tmpl.Spec},
		},
	}
	if _, err := n.Kube.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Job: %v", err)
	}
	var last *batchv1.Job
	err := poll.Wait(t.Context(), nodeenv.PodTimeout, func(ctx context.Context) (bool, error) {
		j, err := n.Kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = j
		for _, c := range j.Status.Conditions {
			if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("Job %s did not finish: %v (status %+v)", name, err, last.Status)
	}
	if last.Status.Succeeded != 1 {
		t.Fatalf("Job %s did not complete: %+v", name, last.Status)
	}
	pods, err := n.Kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the pod of Job %s: %v, %d pods", name, err, len(pods.Items))
	}
	return n.ContainerLog(t, &pods.Items[0], "probe")
}

func containsFunc(lines []string, f func(string) bool) bool {
	for _, l := range lines {
		if f(l) {
			return true
		}
	}
	return false
}
