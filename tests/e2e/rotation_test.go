package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/poll"
)

// providerCalls counts the Mount calls the node's local provider answered
// successfully (it logs each at -v=4).
func (n *node) providerCalls(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile(n.providerLog)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), `"provider call" provider="local" method="/v1alpha1.CSIDriverProvider/Mount"`)
}

// waitForDriverLog waits until the driver's log, after mark, holds every
// string of want on one line.
func (n *node) waitForDriverLog(t *testing.T, mark int64, want ...string) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("the driver to log %q", want), func(context.Context) (bool, error) {
		data, err := os.ReadFile(n.driverLog)
		if err != nil {
			return false, err
		}
		if int64(len(data)) < mark {
			return false, nil
		}
		for line := range strings.SplitSeq(string(data[mark:]), "\n") {
			if containsAll(line, want) {
				return true, nil
			}
		}
		return false, nil
	})
}

// annotateClass sets annotations on a class, as kubectl annotate does.
func (s *suite) annotateClass(t *testing.T, spc *secretsstorev1.SecretProviderClass, kv map[string]string) {
	t.Helper()
	cur := &secretsstorev1.SecretProviderClass{}
	if err := s.ctrl.Get(t.Context(), types.NamespacedName{Namespace: spc.Namespace, Name: spc.Name}, cur); err != nil {
		t.Fatal(err)
	}
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	for k, v := range kv {
		cur.Annotations[k] = v
	}
	if err := s.ctrl.Update(t.Context(), cur); err != nil {
		t.Fatalf("annotate class %s/%s: %v", spc.Namespace, spc.Name, err)
	}
}

// annotatePod sets an annotation on a pod.
func (s *suite) annotatePod(t *testing.T, pod *corev1.Pod, k, v string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, k, v)
	if _, err := s.kube.CoreV1().Pods(pod.Namespace).Patch(t.Context(), pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotate pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// waitForContent waits until the volume's file holds want and returns how
// long that took.
func waitForContent(t *testing.T, target, file string, want []byte) time.Duration {
	t.Helper()
	start := time.Now()
	poll.Until(t, fmt.Sprintf("%s to hold the new content", file), func(context.Context) (bool, error) {
		got, err := os.ReadFile(target + "/" + file)
		return err == nil && string(got) == string(want), nil
	})
	return time.Since(start)
}

// TestRefreshTriggers: with rotation off (upstream's default), a volume is
// refreshed only when asked: a new keymount.io/refresh value on its class,
// then on its pod, refreshes it without any republish (from the request the
// driver holds), the status says which values were handled, and the event
// names the version change. A CreatedOnce class ignores triggers: its new
// value reaches only a new pod.
func TestRefreshTriggers(t *testing.T) {
	n := startNode(t, nodeOptions{driverFlags: []string{"--enable-secret-rotation=false"}})
	ns := n.newNamespace(t)
	v1 := []byte("first-" + randomHex(8))
	n.writeObject(t, "db/password", v1)
	spc := n.createClass(t, ns, "triggered", "local", []object{{name: "db/password", alias: "password"}})
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "triggered"})
	target := n.targetPath(pod, "secrets")
	n.mustPublish(t, pod, "secrets")
	n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"db/password": v1}})

	v2 := []byte("second-" + randomHex(8))
	n.writeObject(t, "db/password", v2)
	mark := n.logMark(t)
	n.mustPublish(t, pod, "secrets")
	n.waitForDriverLog(t, mark, `"refresh decision"`, `decision="skipped_by_policy"`)
	if got := readFile(t, target, "password"); got != string(v1) {
		t.Fatalf("rotation off: a republish changed the file to %q", got)
	}

	n.s.annotateClass(t, spc, map[string]string{rotation.RefreshAnnotation: "class-1"})
	took := waitForContent(t, target, "password", v2)
	t.Logf("class trigger to new file: %s", took)
	n.s.waitForStatus(t, pod, "triggered", func(st *secretsstorev1.SecretProviderClassPodStatus) error {
		if h := st.Status.HandledRefresh; h == nil || h.Class != "class-1" {
			return fmt.Errorf("handledRefresh = %+v, want class class-1", h)
		}
		return nil
	})
	n.s.waitForEvent(t, pod, corev1.EventTypeNormal, "SecretRefreshed", "db/password "+version(v1)+" → "+version(v2))

	v3 := []byte("third-" + randomHex(8))
	n.writeObject(t, "db/password", v3)
	n.s.annotatePod(t, pod, rotation.RefreshAnnotation, "pod-1")
	took = waitForContent(t, target, "password", v3)
	t.Logf("pod trigger to new file: %s", took)
	n.s.waitForStatus(t, pod, "triggered", func(st *secretsstorev1.SecretProviderClassPodStatus) error {
		if h := st.Status.HandledRefresh; h == nil || h.Class != "class-1" || h.Pod != "pod-1" {
			return fmt.Errorf("handledRefresh = %+v, want class class-1, pod pod-1", h)
		}
		return nil
	})

	// CreatedOnce: the trigger is seen and declined; a new pod gets v4.
	n.s.annotateClass(t, spc, map[string]string{rotation.PolicyAnnotation: string(rotation.CreatedOnce)})
	v4 := []byte("fourth-" + randomHex(8))
	n.writeObject(t, "db/password", v4)
	mark = n.logMark(t)
	n.s.annotateClass(t, spc, map[string]string{rotation.RefreshAnnotation: "class-2"})
	n.waitForDriverLog(t, mark, `"refresh decision"`, `decision="skipped_by_policy"`)
	n.mustPublish(t, pod, "secrets")
	if got := readFile(t, target, "password"); got != string(v3) {
		t.Errorf("CreatedOnce: the running pod's file changed to %q, want the old %q", got, v3)
	}
	pod2 := n.createPod(t, ns, "app-2", secretsVolume{name: "secrets", class: "triggered"})
	n.mustPublish(t, pod2, "secrets")
	if got := readFile(t, n.targetPath(pod2, "secrets"), "password"); got != string(v4) {
		t.Errorf("CreatedOnce: a new pod mounted %q, want the store's %q", got, v4)
	}
	n.mustUnpublish(t, pod2, "secrets")
	n.mustUnpublish(t, pod, "secrets")
}

// TestInvalidRotationAnnotation: an invalid policy value is reported on the
// class (event) and in the pod status (condition naming the annotation),
// and the node's default applies.
func TestInvalidRotationAnnotation(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	n.writeObject(t, "db/password", []byte("v-"+randomHex(8)))
	spc := n.createClass(t, ns, "badpolicy", "local", []object{{name: "db/password", alias: "password"}})
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "badpolicy"})
	n.mustPublish(t, pod, "secrets")
	n.s.annotateClass(t, spc, map[string]string{rotation.IntervalAnnotation: "soon"})
	poll.Until(t, "a warning event on the class naming the annotation", func(ctx context.Context) (bool, error) {
		evs, err := n.s.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=badpolicy"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == "InvalidRotationAnnotation" && strings.Contains(e.Message, rotation.IntervalAnnotation) {
				return true, nil
			}
		}
		return false, nil
	})
	n.mustPublish(t, pod, "secrets") // the node refreshes every republish: a status write follows
	n.s.waitForStatus(t, pod, "badpolicy", func(st *secretsstorev1.SecretProviderClassPodStatus) error {
		for _, c := range st.Status.Conditions {
			if c.Type == secretsstorev1.ConditionRotationPolicy && c.Status == metav1.ConditionFalse &&
				strings.Contains(c.Message, rotation.IntervalAnnotation) {
				return nil
			}
		}
		return fmt.Errorf("no RotationPolicyValid=False naming %s in %+v", rotation.IntervalAnnotation, st.Status.Conditions)
	})
	n.mustUnpublish(t, pod, "secrets")
}

// TestRefreshIntervalAndBackoff: with a class interval, frequent republishes
// call the provider only once the interval passed (calls counted at the
// provider); a refresh that fails with the provider down keeps the files,
// sets Current=False and is not retried on every republish but after the
// backoff, and then recovers.
func TestRefreshIntervalAndBackoff(t *testing.T) {
	const interval = 3 * time.Second
	n := startNode(t, nodeOptions{driverFlags: []string{
		"--enable-secret-rotation=false", "--rotation-backoff-initial=10s", "--rotation-backoff-max=10s",
	}})
	ns := n.newNamespace(t)
	v1 := []byte("first-" + randomHex(8))
	n.writeObject(t, "db/password", v1)
	spc := n.createClass(t, ns, "periodic", "local", []object{{name: "db/password", alias: "password"}})
	n.s.annotateClass(t, spc, map[string]string{rotation.IntervalAnnotation: interval.String()})
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "periodic"})
	target := n.targetPath(pod, "secrets")
	req := n.publishRequest(t, pod, "secrets")
	publish := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), kubeletTimeout)
		defer cancel()
		if _, err := n.csi.NodePublishVolume(ctx, req); err != nil {
			t.Fatalf("republish: %v", err)
		}
	}
	publish()
	first := time.Now()
	calls := n.providerCalls(t)

	// kubelet republishing every 100 ms until the new value arrives.
	v2 := []byte("second-" + randomHex(8))
	n.writeObject(t, "db/password", v2)
	republishes := 0
	poll.Until(t, "the new value after the interval", func(context.Context) (bool, error) {
		publish()
		republishes++
		got, err := os.ReadFile(target + "/password")
		return err == nil && string(got) == string(v2), nil
	})
	if since := time.Since(first); since < interval {
		t.Errorf("the new value arrived %s after the first publish, before the class's interval %s", since, interval)
	}
	if got := n.providerCalls(t) - calls; got != 1 {
		t.Errorf("%d republishes until the interval passed made %d provider calls, want 1", republishes, got)
	}

	// The provider goes down; the next due refresh fails.
	sock := n.providerDir + "/local.sock"
	if err := os.Rename(sock, sock+".down"); err != nil {
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			_ = os.Rename(sock+".down", sock)
		}
	})
	mark := n.logMark(t)
	poll.Until(t, "a failed refresh", func(context.Context) (bool, error) {
		publish()
		data, err := os.ReadFile(n.driverLog)
		return err == nil && strings.Contains(string(data[mark:]), `"refresh failed, keeping the mounted files"`), nil
	})
	if got := readFile(t, target, "password"); got != string(v2) {
		t.Errorf("after a failed refresh the file holds %q, want the old %q", got, v2)
	}
	n.s.waitForStatus(t, pod, "periodic", func(st *secretsstorev1.SecretProviderClassPodStatus) error {
		for _, c := range st.Status.Conditions {
			if c.Type == secretsstorev1.ConditionCurrent && c.Status == metav1.ConditionFalse && c.Reason == "RefreshFailed" {
				return nil
			}
		}
		return fmt.Errorf("no Current=False RefreshFailed in %+v", st.Status.Conditions)
	})
	if err := os.Rename(sock+".down", sock); err != nil {
		t.Fatal(err)
	}
	restored = true
	v3 := []byte("third-" + randomHex(8))
	n.writeObject(t, "db/password", v3)
	mark = n.logMark(t)
	publish()
	n.waitForDriverLog(t, mark, `"refresh decision"`, `decision="backoff"`)
	if got := readFile(t, target, "password"); got != string(v2) {
		t.Errorf("a republish within the backoff refreshed the file to %q", got)
	}
	calls = n.providerCalls(t)
	poll.Until(t, "recovery after the backoff", func(context.Context) (bool, error) {
		publish()
		got, err := os.ReadFile(target + "/password")
		return err == nil && string(got) == string(v3), nil
	})
	if got := n.providerCalls(t) - calls; got != 1 {
		t.Errorf("recovery took %d provider calls, want 1: the backoff was not kept", got)
	}
	n.s.waitForStatus(t, pod, "periodic", func(st *secretsstorev1.SecretProviderClassPodStatus) error {
		for _, c := range st.Status.Conditions {
			if c.Type == secretsstorev1.ConditionCurrent && c.Status == metav1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("Current is not True again: %+v", st.Status.Conditions)
	})
	n.mustUnpublish(t, pod, "secrets")
}

// TestManyVolumesFrequentRepublishes: 200 volumes of one class, republished
// every 2 s for 40 s (about 4,000 republishes), with a 20 s interval: the
// provider is called at most once per volume per interval, every volume
// holds its content, and no republish fails.
func TestManyVolumesFrequentRepublishes(t *testing.T) {
	const (
		volumes  = 200
		interval = 20 * time.Second
		period   = 2 * time.Second
		duration = 40 * time.Second
	)
	n := startNode(t, nodeOptions{noSync: true, driverFlags: []string{"--rotation-poll-interval=" + interval.String()}})
	ns := n.newNamespace(t)
	val := []byte("v-" + randomHex(8))
	n.writeObject(t, "db/password", val)
	n.createClass(t, ns, "fleet", "local", []object{{name: "db/password", alias: "password"}})
	pods := make([]*corev1.Pod, volumes)
	for i := range pods {
		pods[i] = n.createPod(t, ns, fmt.Sprintf("app-%03d", i), secretsVolume{name: "secrets", class: "fleet"})
	}
	reqs := make([]func() error, volumes)
	for i, pod := range pods {
		req := n.publishRequest(t, pod, "secrets")
		reqs[i] = func() error {
			ctx, cancel := context.WithTimeout(t.Context(), kubeletTimeout)
			defer cancel()
			_, err := n.csi.NodePublishVolume(ctx, req)
			return err
		}
	}
	calls := n.providerCalls(t)
	var republishes, failures atomic.Int64
	stop := time.Now().Add(duration)
	republish := time.NewTicker(period) // kubelet's cadence
	defer republish.Stop()
	for round := 0; time.Now().Before(stop) || round == 0; round++ {
		var wg sync.WaitGroup
		for _, r := range reqs {
			wg.Go(func() {
				if err := r(); err != nil {
					failures.Add(1)
					t.Errorf("republish: %v", err)
				}
				republishes.Add(1)
			})
		}
		wg.Wait()
		<-republish.C
	}
	made := n.providerCalls(t) - calls
	bound := volumes * (int(duration/interval) + 2)
	t.Logf("%d republishes of %d volumes made %d provider calls (bound %d)", republishes.Load(), volumes, made, bound)
	if made > bound {
		t.Errorf("%d provider calls for %d volumes over %s at a %s interval, want at most %d", made, volumes, duration, interval, bound)
	}
	if made < volumes {
		t.Errorf("only %d provider calls: the first publishes alone make %d", made, volumes)
	}
	for _, pod := range pods {
		if got := readFile(t, n.targetPath(pod, "secrets"), "password"); got != string(val) {
			t.Errorf("pod %s reads %q", pod.Name, got)
		}
	}
	for _, pod := range pods {
		n.mustUnpublish(t, pod, "secrets")
	}
}
