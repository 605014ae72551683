package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/keymount/keymount/tests/nodeenv"
)

// TestPodReadsItsSecrets: a pod with an inline secrets-store volume of the
// local provider reaches Running and its container prints the files, and a
// Job whose pod reads the same class completes.
func TestPodReadsItsSecrets(t *testing.T) {
	t.Parallel()
	n := node(t)
	ns := namespace(t, n)
	password, user := "pw-"+randomHex(8), "user-"+randomHex(4)
	putObject(t, n, ns+"/db/password", password)
	putObject(t, n, ns+"/db/user", user)
	localClass(t, n, ns, "db", `
- objectName: `+ns+`/db/password
  objectAlias: password
- objectName: `+ns+`/db/user
  objectAlias: nested/user
`)

	pod := createPod(t, n, ns, "app", "db", "show", "-follow", mountPath+"/password", mountPath+"/nested/user")
	n.WaitPod(t, ns, "app", "Running", nodeenv.Running)
	n.WaitLog(t, pod, "probe", "the password", hasContent("password", password))
	n.WaitLog(t, pod, "probe", "the user", hasContent("nested/user", user))

	// A Job: the pod reads the files once and exits 0.
	tmpl := n.ProbePod(ns, "", "show", mountPath+"/password")
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	withVolume(&tmpl.Spec, "db")
	backoff := int32(0)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			Template:     corev1.PodTemplateSpec{Spec: tmpl.Spec},
		},
	}
	if _, err := n.Kube.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Job: %v", err)
	}
	var last *batchv1.Job
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, nodeenv.PodTimeout, true, func(ctx context.Context) (bool, error) {
		j, err := n.Kube.BatchV1().Jobs(ns).Get(ctx, "reader", metav1.GetOptions{})
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
		t.Fatalf("Job did not finish: %v (status %+v)", err, last.Status)
	}
	if last.Status.Succeeded != 1 {
		t.Fatalf("Job did not complete: %+v", last.Status)
	}
	pods, err := n.Kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=reader"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the Job's pod: %v, %d pods", err, len(pods.Items))
	}
	lines := n.ContainerLog(t, &pods.Items[0], "probe")
	if !containsFunc(lines, hasContent("password", password)) {
		t.Errorf("the Job's container printed %q, want the password", lines)
	}
}

func containsFunc(lines []string, f func(string) bool) bool {
	for _, l := range lines {
		if f(l) {
			return true
		}
	}
	return false
}

// TestVolumeIsReadOnly: a container that tries to write into the volume
// fails with EROFS, and the file it tried to write does not exist.
func TestVolumeIsReadOnly(t *testing.T) {
	t.Parallel()
	n := node(t)
	ns := namespace(t, n)
	putObject(t, n, ns+"/token", "tok-"+randomHex(8))
	localClass(t, n, ns, "ro", `
- objectName: `+ns+`/token
  objectAlias: token
`)
	pod := createPod(t, n, ns, "writer", "ro", "write", mountPath+"/planted")
	n.WaitPod(t, ns, "writer", "Running", nodeenv.Running)
	line := n.WaitLog(t, pod, "probe", "the write's outcome", func(l string) bool { return strings.HasPrefix(l, "write ") })
	if want := `write ` + mountPath + `/planted error="read-only file system"`; line != want {
		t.Errorf("the container's write: %q, want %q", line, want)
	}
}
