//go:build integration

package restart_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/restart"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

const driverName = "secrets-store.csi.k8s.io"

// apps is the control plane the tests share, with an administrator.
type apps struct {
	env   *k8senv.Env
	admin kubernetes.Interface
}

// startAPI returns the package's shared control plane (k8senv.Shared): a
// test using it works in namespaces of its own (namespace) and installs
// nothing cluster-scoped.
func startAPI(t *testing.T) *apps {
	t.Helper()
	env := k8senv.Shared(t, k8senv.Options{})
	return &apps{env: env, admin: newAdmin(env)}
}

// startOwnAPI starts a control plane for one test, for a test that
// installs cluster-scoped objects it asserts on.
func startOwnAPI(t *testing.T) *apps {
	t.Helper()
	env := k8senv.Start(t, k8senv.Options{})
	return &apps{env: env, admin: newAdmin(env)}
}

func newAdmin(env *k8senv.Env) kubernetes.Interface { return kubernetes.NewForConfigOrDie(env.Config) }

func (a *apps) namespace(t *testing.T) string {
	t.Helper()
	ns, err := a.admin.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "restart-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// node is one node's Restarter with the events it recorded.
type node struct {
	r      *restart.Restarter
	events *record.FakeRecorder
}

// newNode returns a Restarter with a REST client of its own, as cfg.
func newNode(t *testing.T, cfg *rest.Config) *node {
	t.Helper()
	c, err := kube.NewRESTClient(cfg, restart.GroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	events := record.NewFakeRecorder(100)
	return &node{r: restart.New(c, events), events: events}
}

// drain returns the events recorded so far.
func (n *node) drain() []string {
	var out []string
	for {
		select {
		case e := <-n.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

var labels = map[string]string{"app": "web"}

func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{rotation.RestartAnnotation: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
}

func controllerRef(kind, name string, uid metav1.Object) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid.GetUID(), Controller: new(true)}
}

// pod creates a pod on nodeName, controlled by owner, with a volume of
// class and the given annotations.
func (a *apps) pod(t *testing.T, ns, name, nodeName, class string, owner *metav1.OwnerReference, annotations map[string]string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
			Volumes: []corev1.Volume{{Name: "secrets", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
				Driver: driverName, VolumeAttributes: map[string]string{"secretProviderClass": class},
			}}}},
		},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	p, err := a.admin.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// deployment creates a Deployment and a ReplicaSet it controls: no
// controller runs, the objects are as the Deployment controller makes them.
func (a *apps) deployment(t *testing.T, ns string) (*appsv1.Deployment, *appsv1.ReplicaSet) {
	t.Helper()
	d, err := a.admin.AppsV1().Deployments(ns).Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: podTemplate(),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := a.admin.AppsV1().ReplicaSets(ns).Create(t.Context(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", Labels: labels, OwnerReferences: []metav1.OwnerReference{controllerRef("Deployment", d.Name, d)}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: new(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: podTemplate(),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d, rs
}

func (a *apps) getDeployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := a.admin.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func class(ns, name string, annotations map[string]string) *secretsstorev1.SecretProviderClass {
	return &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}}
}

func objects(version string) []secretsstorev1.SecretProviderClassObject {
	return []secretsstorev1.SecretProviderClassObject{{ID: "db/password", Version: version}, {ID: "db/user", Version: "1"}}
}

// raceRestart has every node restart for its pod at once, and returns the
// results.
func raceRestart(t *testing.T, nodes []*node, pods []*corev1.Pod, spc *secretsstorev1.SecretProviderClass, objs []secretsstorev1.SecretProviderClassObject) []restart.Result {
	t.Helper()
	results := make([]restart.Result, len(nodes))
	errs := make([]error, len(nodes))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			<-start
			results[i], errs[i] = n.r.Restart(t.Context(), restart.Change{Pod: pods[i], Class: spc, Objects: objs})
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	return results
}

func patchedCount(results []restart.Result) int {
	n := 0
	for _, r := range results {
		if r.Patched {
			n++
		}
	}
	return n
}

// TestRestartOncePerChange: two pods of one Deployment on two nodes report
// the same change, and two controller replicas act on both at once; the
// Deployment's pod template changes once, to the value derived from the new
// versions, and one event says so. The same change again writes nothing; a
// new change reported by the pods the restart rolled out writes once more;
// an older change reported late by pods older than the last restart writes
// nothing (Stale).
func TestRestartOncePerChange(t *testing.T) {
	a := startAPI(t)
	ns := a.namespace(t)
	d, rs := a.deployment(t, ns)
	ref := controllerRef("ReplicaSet", rs.Name, rs)
	pods := []*corev1.Pod{
		a.pod(t, ns, "web-1-a", "node-a", "db", &ref, map[string]string{rotation.RestartAnnotation: "true"}),
		a.pod(t, ns, "web-1-b", "node-b", "db", &ref, map[string]string{rotation.RestartAnnotation: "true"}),
	}
	nodes := []*node{newNode(t, a.env.Config), newNode(t, a.env.Config)}
	spc := class(ns, "db", nil)
	key := restart.AnnotationKey("db")

	// The pods the restart rolled out carry the template's annotation.
	rolled := map[string]string{rotation.RestartAnnotation: "true", key: restart.AnnotationValue(objects("2"))}
	newPods := []*corev1.Pod{
		a.pod(t, ns, "web-2-a", "node-a", "db", &ref, rolled),
		a.pod(t, ns, "web-2-b", "node-b", "db", &ref, rolled),
	}

	steps := []struct {
		name           string
		pods           []*corev1.Pod
		objects        []secretsstorev1.SecretProviderClassObject
		wantGeneration int64
		wantPatched    int
		wantStale      bool
		wantValue      []secretsstorev1.SecretProviderClassObject
	}{
		{name: "a change", pods: pods, objects: objects("2"), wantGeneration: d.Generation + 1, wantPatched: 1},
		{name: "the same change again", pods: pods, objects: objects("2"), wantGeneration: d.Generation + 1},
		{name: "the same change, objects in another order", pods: pods, objects: []secretsstorev1.SecretProviderClassObject{objects("2")[1], objects("2")[0]}, wantGeneration: d.Generation + 1},
		{name: "a new change reported by the rolled-out pods", pods: newPods, objects: objects("3"), wantGeneration: d.Generation + 2, wantPatched: 1},
		// The old pods, still running, report an older change late: the
		// workload was restarted since they started, nothing is written.
		{name: "an older change reported by pods older than the restart", pods: pods, objects: objects("2"), wantGeneration: d.Generation + 2,
			wantStale: true, wantValue: objects("3")},
	}
	for _, st := range steps {
		before := a.getDeployment(t, ns, d.Name)
		results := raceRestart(t, nodes, st.pods, spc, st.objects)
		after := a.getDeployment(t, ns, d.Name)
		if after.Generation != st.wantGeneration {
			t.Errorf("%s: generation %d, want %d", st.name, after.Generation, st.wantGeneration)
		}
		if got := patchedCount(results); got != st.wantPatched {
			t.Errorf("%s: %d Restarts say they patched, want %d: %+v", st.name, got, st.wantPatched, results)
		}
		if st.wantPatched == 0 && after.ResourceVersion != before.ResourceVersion {
			t.Errorf("%s: resourceVersion %s -> %s, want no write", st.name, before.ResourceVersion, after.ResourceVersion)
		}
		want := restart.AnnotationValue(st.objects)
		if st.wantValue != nil {
			want = restart.AnnotationValue(st.wantValue)
		}
		if got := after.Spec.Template.Annotations[key]; got != want {
			t.Errorf("%s: template annotation %s=%q, want %q", st.name, key, got, want)
		}
		if after.Spec.Template.Annotations[rotation.RestartAnnotation] != "true" {
			t.Errorf("%s: the template lost its other annotations: %v", st.name, after.Spec.Template.Annotations)
		}
		for _, r := range results {
			if r.Workload != (restart.Workload{Kind: restart.KindDeployment, Namespace: ns, Name: d.Name, UID: d.UID}) ||
				r.Value != restart.AnnotationValue(st.objects) || r.Stale != st.wantStale {
				t.Errorf("%s: result %+v", st.name, r)
			}
		}
		events := slicesConcat(nodes[0].drain(), nodes[1].drain())
		if len(events) != st.wantPatched {
			t.Errorf("%s: events %q, want %d", st.name, events, st.wantPatched)
		}
		for _, e := range events {
			if !strings.Contains(e, "Normal "+restart.ReasonRestarting+" restarting: SecretProviderClass db changed: objects db/password, db/user") {
				t.Errorf("%s: event %q", st.name, e)
			}
		}
	}
}

func slicesConcat(a, b []string) []string { return append(append([]string(nil), a...), b...) }

// TestRestartStatefulSetAndDaemonSet: their pods' owners are restarted
// directly; a class name too long for an annotation name gets its hash.
func TestRestartStatefulSetAndDaemonSet(t *testing.T) {
	a := startAPI(t)
	ns := a.namespace(t)
	longClass := strings.Repeat("long-class-name.", 5) + "x"
	sts, err := a.admin.AppsV1().StatefulSets(ns).Create(t.Context(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec:       appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: podTemplate()},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := a.admin.AppsV1().DaemonSets(ns).Create(t.Context(), &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: podTemplate()},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(t, a.env.Config)
	optIn := class(ns, longClass, map[string]string{rotation.RestartAnnotation: "true"}) // the class opts in, the pods do not say
	tests := []struct {
		kind       string
		obj        metav1.Object
		generation func() (int64, map[string]string)
	}{
		{kind: restart.KindStatefulSet, obj: sts, generation: func() (int64, map[string]string) {
			s, err := a.admin.AppsV1().StatefulSets(ns).Get(t.Context(), sts.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return s.Generation, s.Spec.Template.Annotations
		}},
		{kind: restart.KindDaemonSet, obj: ds, generation: func() (int64, map[string]string) {
			d, err := a.admin.AppsV1().DaemonSets(ns).Get(t.Context(), ds.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return d.Generation, d.Spec.Template.Annotations
		}},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			ref := controllerRef(tc.kind, tc.obj.GetName(), tc.obj)
			p := a.pod(t, ns, strings.ToLower(tc.kind)+"-0", "node-a", longClass, &ref, nil)
			before, _ := tc.generation()
			res, err := n.r.Restart(t.Context(), restart.Change{Pod: p, Class: optIn, Objects: objects("2")})
			if err != nil || !res.Patched {
				t.Fatalf("Restart = %+v, %v; want patched", res, err)
			}
			after, annotations := tc.generation()
			if after != before+1 {
				t.Errorf("generation %d -> %d, want one more", before, after)
			}
			key := restart.AnnotationKey(longClass)
			if len(key) != len(restart.RolloutAnnotationPrefix)+16 || annotations[key] != restart.AnnotationValue(objects("2")) {
				t.Errorf("template annotations %v, want %s", annotations, key)
			}
			if res.Workload.Kind != tc.kind || res.Workload.UID != tc.obj.GetUID() {
				t.Errorf("workload %+v", res.Workload)
			}
			if res, err := n.r.Restart(t.Context(), restart.Change{Pod: p, Class: optIn, Objects: objects("2")}); err != nil || res.Patched {
				t.Errorf("the same change again: %+v, %v; want no write", res, err)
			}
		})
	}
}

// TestRestartNothingToDo: a pod that did not opt in, and pods with no
// workload keymount restarts, change nothing; the latter are told why.
func TestRestartNothingToDo(t *testing.T) {
	a := startAPI(t)
	ns := a.namespace(t)
	d, rs := a.deployment(t, ns)
	job, err := a.admin.BatchV1().Jobs(ns).Create(t.Context(), &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "migrate"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "m", Image: "registry.example/m:1"}},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rsRef := controllerRef("ReplicaSet", rs.Name, rs)
	jobRef := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: new(true)}
	orphanRS, err := a.admin.AppsV1().ReplicaSets(ns).Create(t.Context(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan"},
		Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: podTemplate()},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orphanRef := controllerRef("ReplicaSet", orphanRS.Name, orphanRS)
	optIn := map[string]string{rotation.RestartAnnotation: "true"}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		reason string // "" when the pod did not opt in: no event
	}{
		{name: "no opt-in", pod: a.pod(t, ns, "quiet", "node-a", "db", &rsRef, nil)},
		{name: "opted out on the pod", pod: a.pod(t, ns, "out", "node-a", "db", &rsRef, map[string]string{rotation.RestartAnnotation: "false"})},
		{name: "bare pod", pod: a.pod(t, ns, "bare", "node-a", "db", nil, optIn), reason: "the pod has no controller"},
		{name: "Job", pod: a.pod(t, ns, "job-x", "node-a", "db", &jobRef, optIn), reason: "the pod's controller is Job migrate"},
		{name: "ReplicaSet without Deployment", pod: a.pod(t, ns, "orphan-x", "node-a", "db", &orphanRef, optIn), reason: "no Deployment controls the pod's ReplicaSet orphan"},
	}
	n := newNode(t, a.env.Config)
	before := a.getDeployment(t, ns, d.Name)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spc := class(ns, "db", nil)
			if tc.name == "opted out on the pod" {
				spc.Annotations = optIn
			}
			res, err := n.r.Restart(t.Context(), restart.Change{Pod: tc.pod, Class: spc, Objects: objects("2")})
			if err != nil || res.Patched || res.Workload != (restart.Workload{}) {
				t.Fatalf("Restart = %+v, %v; want nothing done", res, err)
			}
			events := n.drain()
			switch {
			case tc.reason == "" && len(events) != 0:
				t.Errorf("events %q, want none", events)
			case tc.reason != "" && (len(events) != 1 || !strings.Contains(events[0], "Normal "+restart.ReasonRestartSkipped) ||
				!strings.Contains(events[0], tc.reason)):
				t.Errorf("events %q, want one saying %q", events, tc.reason)
			}
		})
	}
	if after := a.getDeployment(t, ns, d.Name); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the Deployment was written: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
	}
}

// TestRestartForbidden: without the component's RBAC rules the Restart,
// as keymount-controller's service account, fails with an error and a
// Warning event on the pod that name the component; with them (the
// component's own ClusterRole, as shipped) it restarts.
func TestRestartForbidden(t *testing.T) {
	a := startOwnAPI(t) // own: it asserts on the RBAC of the component's ClusterRole, which it installs
	ns := a.namespace(t)
	d, rs := a.deployment(t, ns)
	ref := controllerRef("ReplicaSet", rs.Name, rs)
	p := a.pod(t, ns, "web-1-a", "node-a", "db", &ref, map[string]string{rotation.RestartAnnotation: "true"})
	const user = "system:serviceaccount:kube-system:keymount-controller"
	_, cfg := a.env.KubeconfigFor(t, user, []string{"system:serviceaccounts"})
	n := newNode(t, cfg)
	change := restart.Change{Pod: p, Class: class(ns, "db", nil), Objects: objects("2")}

	res, err := n.r.Restart(t.Context(), change)
	if err == nil || res.Patched || !strings.Contains(err.Error(), restart.RBACComponent) || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("Restart without RBAC = %+v, %v; want a forbidden error naming %s", res, err, restart.RBACComponent)
	}
	events := n.drain()
	if len(events) != 1 || !strings.Contains(events[0], "Warning "+restart.ReasonRestartFailed) || !strings.Contains(events[0], restart.RBACComponent) {
		t.Errorf("events %q, want one Warning naming %s", events, restart.RBACComponent)
	}

	grantComponent(t, a, user)
	// The API server's authorizer learns of the binding from its own watch.
	err = poll.Wait(t.Context(), 30*time.Second, func(ctx context.Context) (bool, error) {
		res, err = n.r.Restart(ctx, change)
		return err == nil, nil
	})
	if err != nil || !res.Patched {
		t.Fatalf("Restart with the component's rules = %+v, %v; want patched", res, err)
	}
	if got := a.getDeployment(t, ns, d.Name); got.Generation != d.Generation+1 {
		t.Errorf("generation %d, want %d", got.Generation, d.Generation+1)
	}
}

// grantComponent creates the component's ClusterRole as shipped and binds
// it to user.
func grantComponent(t *testing.T, a *apps, user string) {
	t.Helper()
	data, err := os.ReadFile("../../deploy/components/restart-on-change/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var role *rbacv1.ClusterRole
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if obj["kind"] == "ClusterRole" {
			role = &rbacv1.ClusterRole{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, role); err != nil {
				t.Fatal(err)
			}
		}
	}
	if role == nil {
		t.Fatal("the component has no ClusterRole")
	}
	role.ResourceVersion = ""
	if _, err := a.admin.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := a.admin.RbacV1().ClusterRoleBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// roundTripper runs before ahead of the first request it sees of method.
type roundTripper struct {
	next   http.RoundTripper
	method string
	before func()
	once   sync.Once
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == rt.method {
		rt.once.Do(rt.before)
	}
	return rt.next.RoundTrip(req)
}

// TestRestartLosesTheRace: another node patches the Deployment between this
// node's read and its patch. This node's patch conflicts; it reads again,
// finds the value and writes nothing: the template changes once, and only
// the winner records an event.
func TestRestartLosesTheRace(t *testing.T) {
	a := startAPI(t)
	ns := a.namespace(t)
	d, rs := a.deployment(t, ns)
	ref := controllerRef("ReplicaSet", rs.Name, rs)
	optIn := map[string]string{rotation.RestartAnnotation: "true"}
	podA := a.pod(t, ns, "web-1-a", "node-a", "db", &ref, optIn)
	podB := a.pod(t, ns, "web-1-b", "node-b", "db", &ref, optIn)
	spc := class(ns, "db", nil)
	winner := newNode(t, a.env.Config)
	var winnerResult restart.Result
	var winnerErr error
	cfg := rest.CopyConfig(a.env.Config)
	cfg.WrapTransport = func(next http.RoundTripper) http.RoundTripper {
		return &roundTripper{next: next, method: http.MethodPatch, before: func() {
			winnerResult, winnerErr = winner.r.Restart(t.Context(), restart.Change{Pod: podB, Class: spc, Objects: objects("2")})
		}}
	}
	loser := newNode(t, cfg)

	res, err := loser.r.Restart(t.Context(), restart.Change{Pod: podA, Class: spc, Objects: objects("2")})
	if err != nil || res.Patched {
		t.Errorf("the loser: %+v, %v; want no write", res, err)
	}
	if winnerErr != nil || !winnerResult.Patched {
		t.Errorf("the winner: %+v, %v; want its patch", winnerResult, winnerErr)
	}
	if got := a.getDeployment(t, ns, d.Name); got.Generation != d.Generation+1 {
		t.Errorf("generation %d, want %d", got.Generation, d.Generation+1)
	}
	if e := loser.drain(); len(e) != 0 {
		t.Errorf("the loser's events %q, want none", e)
	}
	if e := winner.drain(); len(e) != 1 {
		t.Errorf("the winner's events %q, want one", e)
	}
}
