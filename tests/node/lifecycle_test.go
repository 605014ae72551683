package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/nodeenv"
	"github.com/keymount/keymount/tests/poll"
)

// TestPodDeletionCleansUp: deleting a pod makes kubelet unpublish its
// volume; the driver removes the mount and its state, the pod status goes,
// and the Secret synced for the pod is garbage-collected by
// kube-controller-manager once its owner is gone.
func TestPodDeletionCleansUp(t *testing.T) {
	t.Parallel()
	n := node(t)
	ns := namespace(t, n)
	password := "pw-" + randomHex(8)
	putObject(t, n, ns+"/password", password)
	localClass(t, n, ns, "db", `
- objectName: `+ns+`/password
  objectAlias: password
`, &secretsstorev1.SecretObject{
		SecretName: "db-synced",
		Type:       string(corev1.SecretTypeOpaque),
		Data:       []*secretsstorev1.SecretObjectData{{ObjectName: "password", Key: "password"}},
	})
	pod := createPod(t, n, ns, "app", "db", "show", "-follow", mountPath+"/password")
	n.WaitPod(t, ns, "app", "Running", nodeenv.Running)
	n.WaitLog(t, pod, "probe", "the password", hasContent("password", password))

	ctx := t.Context()
	statusName := pod.Name + "-" + ns + "-db"
	secret := waitFor(t, "the synced Secret", func(ctx context.Context) (*corev1.Secret, error) {
		s, err := n.Kube.CoreV1().Secrets(ns).Get(ctx, "db-synced", metav1.GetOptions{})
		if err != nil || string(s.Data["password"]) != password {
			return nil, err
		}
		return s, nil
	})
	if len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0].UID != pod.UID {
		t.Fatalf("the synced Secret's owners are %+v, want the pod %s", secret.OwnerReferences, pod.UID)
	}
	waitFor(t, "the pod status", func(ctx context.Context) (*secretsstorev1.SecretProviderClassPodStatus, error) {
		st := &secretsstorev1.SecretProviderClassPodStatus{}
		err := n.Ctrl.Get(ctx, client.ObjectKey{Namespace: ns, Name: statusName}, st)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return st, err
	})

	target := n.TargetPath(pod, "secrets")
	stateDir := n.VolumeStateDir(volumeHandle(t, target))
	if _, err := os.Stat(stateDir); err != nil {
		t.Fatalf("the driver's state of the volume: %v", err)
	}

	if err := n.Kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the pod", func(ctx context.Context) error {
		_, err := n.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err
	})
	waitGone(t, "the pod status", func(ctx context.Context) error {
		return n.Ctrl.Get(ctx, client.ObjectKey{Namespace: ns, Name: statusName}, &secretsstorev1.SecretProviderClassPodStatus{})
	})
	waitGone(t, "the synced Secret", func(ctx context.Context) error {
		_, err := n.Kube.CoreV1().Secrets(ns).Get(ctx, "db-synced", metav1.GetOptions{})
		return err
	})
	waitCleanedUp(t, n, pod, stateDir)
}

// TestMissingClassWaitsForIt: a pod whose class does not exist stays in
// ContainerCreating with an event naming the class, and starts once the
// class is created.
func TestMissingClassWaitsForIt(t *testing.T) {
	t.Parallel()
	n := node(t)
	ns := namespace(t, n)
	value := "late-" + randomHex(8)
	putObject(t, n, ns+"/late", value)
	pod := createPod(t, n, ns, "early", "arrives-later", "show", "-follow", mountPath+"/late")

	waitFor(t, "a FailedMount event naming the class", func(ctx context.Context) (*corev1.Event, error) {
		evs, err := n.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=early"})
		if err != nil {
			return nil, err
		}
		for i, e := range evs.Items {
			if e.Reason == "FailedMount" && strings.Contains(e.Message, "arrives-later") {
				return &evs.Items[i], nil
			}
		}
		return nil, nil
	})
	p, err := n.Kube.CoreV1().Pods(ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status.ContainerStatuses) == 1 {
		if w := p.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ContainerCreating" {
			t.Errorf("the pod's container is %+v, want waiting in ContainerCreating", p.Status.ContainerStatuses[0].State)
		}
	} else if p.Status.Phase != corev1.PodPending {
		t.Errorf("the pod is %s, want Pending", p.Status.Phase)
	}

	localClass(t, n, ns, "arrives-later", `
- objectName: `+ns+`/late
  objectAlias: late
`)
	n.WaitPod(t, ns, "early", "Running", nodeenv.Running)
	n.WaitLog(t, pod, "probe", "the late class's file", hasContent("late", value))
}

// volumeHandle reads the volume ID kubelet gave the pod's inline volume
// from kubelet's own record next to the target.
func volumeHandle(t *testing.T, target string) string {
	t.Helper()
	// kubelet rewrites vol_data.json at every SetUp, republishes included,
	// by truncating it and then writing: a read can find it empty or half
	// written, so read until it parses.
	path := filepath.Join(filepath.Dir(target), "vol_data.json")
	var handle string
	var last error
	err := poll.Wait(t.Context(), nodeenv.PodTimeout, func(context.Context) (bool, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return false, err // written once before the first publish: never missing after
		}
		var vd struct {
			VolumeHandle string `json:"volumeHandle"`
		}
		if err := json.Unmarshal(data, &vd); err != nil || vd.VolumeHandle == "" {
			if err == nil {
				err = errors.New("no volumeHandle")
			}
			last = fmt.Errorf("%w: %q", err, data)
			return false, nil
		}
		handle = vd.VolumeHandle
		return true, nil
	})
	if err != nil {
		t.Fatalf("kubelet's vol_data.json: %v (last read: %v)", err, last)
	}
	return handle
}

// waitFor polls get until it returns a non-nil value.
func waitFor[T any](t *testing.T, what string, get func(context.Context) (*T, error)) *T {
	t.Helper()
	var got *T
	err := poll.Wait(t.Context(), nodeenv.PodTimeout, func(ctx context.Context) (bool, error) {
		v, err := get(ctx)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		got = v
		return v != nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return got
}

// waitGone polls get until it returns a NotFound error.
func waitGone(t *testing.T, what string, get func(context.Context) error) {
	t.Helper()
	err := poll.Wait(t.Context(), nodeenv.PodTimeout, func(ctx context.Context) (bool, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("waiting until %s is gone: %v", what, err)
	}
}
