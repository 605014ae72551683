package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/keymount/keymount/controller/restart"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/ctrltest"
	"github.com/keymount/keymount/tests/poll"
)

// controllerUser is keymount-controller's ServiceAccount, which
// deploy/components/restart-on-change binds.
const controllerUser = "system:serviceaccount:kube-system:keymount-controller"

// startRestartController runs keymount-controller's restart reconcilers
// in the test, as controllerUser with the component's RBAC as shipped,
// until the test ends.
func (s *suite) startRestartController(t *testing.T) {
	t.Helper()
	_, cfg := s.env.KubeconfigFor(t, controllerUser, []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"})
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	mgr := ctrltest.NewManager(t, cfg, ctrl.Options{Scheme: scheme})
	if err := restart.SetupWithManager(t.Context(), mgr, restart.Options{}); err != nil {
		t.Fatal(err)
	}
	ctrltest.Start(t, mgr)
}

// TestRestartOnChangeAcrossNodes: a Deployment's two replicas run on two
// nodes and mount a class with keymount.io/restart-on-change. A change in
// the store refreshes both volumes at the same moment, on both nodes; the
// nodes report it in their pod statuses, and keymount-controller (as its
// own ServiceAccount, with the component's RBAC and admission policy)
// restarts the Deployment: its pod template gets the rollout annotation
// once (its generation rises by exactly one), with the value derived from
// the new versions, and one SecretRestarting event.
func TestRestartOnChangeAcrossNodes(t *testing.T) {
	n1 := startNode(t, nodeOptions{})
	n2 := startNode(t, nodeOptions{})
	n1.s.startRestartController(t)
	ns := n1.newNamespace(t)
	v1 := []byte("restart-v1-" + randomHex(8))
	for _, n := range []*node{n1, n2} { // one store seen from both nodes
		n.writeObject(t, "token", v1)
	}
	spc := n1.createClass(t, ns, "restarting", "local", []object{{name: "token"}})
	n1.s.annotateClass(t, spc, map[string]string{rotation.RestartAnnotation: "true"})

	dep := n1.s.createDeployment(t, ns, "web")
	rs := n1.s.createReplicaSet(t, dep)
	p1 := n1.createPod(t, ns, "web-1", secretsVolume{name: "secrets", class: "restarting"})
	p2 := n2.createPod(t, ns, "web-2", secretsVolume{name: "secrets", class: "restarting"})
	for _, p := range []*corev1.Pod{p1, p2} {
		n1.s.setController(t, p, "apps/v1", "ReplicaSet", rs.Name, rs.UID, rs.Spec.Selector.MatchLabels)
	}
	n1.mustPublish(t, p1, "secrets")
	n2.mustPublish(t, p2, "secrets")
	before := n1.s.deployment(t, ns, "web")

	v2 := []byte("restart-v2-" + randomHex(8))
	for _, n := range []*node{n1, n2} {
		n.writeObject(t, "token", v2)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, np := range []struct {
		n *node
		p *corev1.Pod
	}{{n1, p1}, {n2, p2}} {
		wg.Go(func() { errs[i] = np.n.publish(t, np.p, "secrets") })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("republish: %v", err)
		}
	}
	n1.checkPodStatus(t, p1, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"token": v2}, synced: "", changed: true})
	n2.checkPodStatus(t, p2, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"token": v2}, synced: "", changed: true})

	key := restart.AnnotationKey("restarting")
	var after *appsv1.Deployment
	poll.Until(t, "the controller's restart of the Deployment", func(context.Context) (bool, error) {
		after = n1.s.deployment(t, ns, "web")
		return after.Spec.Template.Annotations[key] != "", nil
	})
	want := after.Spec.Template.Annotations[key]
	if after.Generation != before.Generation+1 {
		t.Errorf("the Deployment's generation went %d -> %d, want exactly one template change", before.Generation, after.Generation)
	}
	events, err := n1.s.kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=web,involvedObject.kind=Deployment"})
	if err != nil {
		t.Fatal(err)
	}
	restarting := 0
	poll.Until(t, "the restart event", func(ctx context.Context) (bool, error) {
		evs, err := n1.s.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,involvedObject.kind=Deployment"})
		events = evs
		return err == nil && len(evs.Items) > 0, err
	})
	for _, e := range events.Items {
		if e.Reason == restart.ReasonRestarting {
			restarting += int(max(e.Count, 1))
		}
	}
	if restarting != 1 {
		t.Errorf("%d %s events on the Deployment, want 1", restarting, restart.ReasonRestarting)
	}

	// The same versions again (kubelet's next republish): nothing written.
	n1.mustPublish(t, p1, "secrets")
	n2.mustPublish(t, p2, "secrets")
	if again := n1.s.deployment(t, ns, "web"); again.Generation != after.Generation || again.Spec.Template.Annotations[key] != want {
		t.Errorf("an unchanged republish changed the Deployment: generation %d, %s=%q", again.Generation, key, again.Spec.Template.Annotations[key])
	}
	n1.mustUnpublish(t, p1, "secrets")
	n2.mustUnpublish(t, p2, "secrets")
}

func (s *suite) createDeployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: neverRuns}}},
			},
		},
	}
	created, err := s.kube.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Deployment: %v", err)
	}
	return created
}

func (s *suite) createReplicaSet(t *testing.T, d *appsv1.Deployment) *appsv1.ReplicaSet {
	t.Helper()
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: d.Namespace, Name: d.Name + "-" + randomHex(4), Labels: d.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr(true),
			}},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
	created, err := s.kube.AppsV1().ReplicaSets(d.Namespace).Create(t.Context(), rs, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ReplicaSet: %v", err)
	}
	return created
}

func (s *suite) deployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := s.kube.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// setController makes a pod owned by a controller, as the controller's
// own pods are: its controller reference and the labels its selector
// matches (keymount confirms an owner by both).
func (s *suite) setController(t *testing.T, pod *corev1.Pod, apiVersion, kind, name string, uid types.UID, labels map[string]string) {
	t.Helper()
	labelJSON, err := json.Marshal(labels)
	if err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":%s,"ownerReferences":[{"apiVersion":%q,"kind":%q,"name":%q,"uid":%q,"controller":true}]}}`,
		labelJSON, apiVersion, kind, name, uid)
	if _, err := s.kube.CoreV1().Pods(pod.Namespace).Patch(t.Context(), pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("set the controller of pod %s: %v", pod.Name, err)
	}
	poll.Until(t, "the pod's owner in the API", func(ctx context.Context) (bool, error) {
		p, err := s.kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && len(p.OwnerReferences) == 1 && len(p.Labels) >= len(labels), err
	})
}
