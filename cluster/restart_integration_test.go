//go:build integration

package cluster_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster"
	"github.com/keymount/keymount/cluster/podstatus"
	"github.com/keymount/keymount/controller/restart"
	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/ctrltest"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// TestRestartOnChangeAcrossNodes: two pods of one Deployment, on two nodes,
// each with its node's cluster side, and keymount-controller's restart
// reconcilers. A first publish restarts nothing and reports no change. A
// refresh that changes both volumes, reported by both nodes at once in
// their pod statuses (ContentChanged, the new versions), changes the
// Deployment's pod template once, with one event, written by the
// controller; the nodes write no workload. The pod whose container mounts
// the volume through subPath gets a Warning event from its node.
func TestRestartOnChangeAcrossNodes(t *testing.T) {
	// The package's shared control plane: its objects are in a namespace of its own, its nodes'
	// cluster sides and the restart controller stop with the test, and only it creates workloads.
	env := k8senv.Shared(t, k8senv.Options{CRDDirectoryPaths: []string{"../deploy/crds"}})
	cs := kubernetes.NewForConfigOrDie(restConfig(env))
	api := newAPIClient(t, env)
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "restart-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spc := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "db"},
		Spec:       secretsstorev1.SecretProviderClassSpec{Provider: "local"},
	}
	if err := api.Create(t.Context(), spc); err != nil {
		t.Fatal(err)
	}
	d, rs := createDeployment(t, cs, ns.Name)
	optIn := map[string]string{rotation.RestartAnnotation: "true"}
	rsRef := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: new(true)}
	pods := []*corev1.Pod{
		createPod(t, cs, ns.Name, "web-1-a", "node-a", rsRef, optIn, &corev1.VolumeMount{Name: "secrets", MountPath: "/etc/app/password", SubPath: "password"}),
		createPod(t, cs, ns.Name, "web-1-b", "node-b", rsRef, optIn, nil),
	}
	nodes := make([]*cluster.Cluster, len(pods))
	for i, p := range pods {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		nodes[i], err = cluster.Start(ctx, cluster.Config{Rest: restConfig(env), Node: p.Spec.NodeName, DriverName: driver.DefaultDriverName})
		if err != nil {
			t.Fatal(err)
		}
		poll.UntilTrue(t, "the caches of "+p.Spec.NodeName+" to sync", nodes[i].Synced)
	}
	startRestartController(t, restConfig(env))
	outcome := func(p *corev1.Pod, version string, first bool) *driver.Outcome {
		return &driver.Outcome{
			VolumeID: "csi-" + p.Name, TargetPath: "/var/lib/kubelet/pods/" + string(p.UID) + "/volumes/kubernetes.io~csi/secrets/mount",
			PodName: p.Name, PodNamespace: p.Namespace, PodUID: string(p.UID), ClassName: spc.Name, Class: spc,
			Objects: []volume.Object{{ID: "password", Version: version}}, First: first, Changed: true,
		}
	}
	publishAll := func(version string, first bool) {
		var wg sync.WaitGroup
		errs := make([]error, len(nodes))
		for i, n := range nodes {
			wg.Go(func() { errs[i] = n.AfterPublish(t.Context(), outcome(pods[i], version, first)) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("AfterPublish: %v", err)
		}
	}
	generation := func() (int64, string) {
		got, err := cs.AppsV1().Deployments(ns.Name).Get(t.Context(), d.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Generation, got.Spec.Template.Annotations[restart.AnnotationKey(spc.Name)]
	}
	reports := func(version string) bool { return podStatusesSay(t, api, pods, spc.Name, version) }

	publishAll("1", true)
	if !reports("1") {
		t.Fatal("after the first publishes the pod statuses do not say version 1 without a change")
	}
	publishAll("2", false)
	if !reports("2") {
		t.Fatal("after the change the pod statuses do not report it with version 2")
	}
	want := restart.AnnotationValue([]secretsstorev1.SecretProviderClassObject{{ID: "password", Version: "2"}})
	poll.UntilTrue(t, "the controller's restart", func() bool { _, v := generation(); return v == want })
	if gen, _ := generation(); gen != d.Generation+1 {
		t.Errorf("after the change: generation %d, want %d: one restart, none for the first publish", gen, d.Generation+1)
	}
	poll.UntilTrue(t, "the subPath warning on "+pods[0].Name, func() bool {
		return len(eventsOn(t, cs, pods[0], cluster.ReasonSubPathNotRefreshed)) > 0
	})
	if ev := eventsOn(t, cs, pods[0], cluster.ReasonSubPathNotRefreshed)[0]; ev.Type != corev1.EventTypeWarning ||
		!strings.Contains(ev.Message, "app (/etc/app/password)") || !strings.Contains(ev.Message, "old content until restarted") ||
		!strings.Contains(ev.Message, "keymount-controller restarts the workload") {
		t.Errorf("subPath event: %s %q", ev.Type, ev.Message)
	}
	checkRestartEvent(t, cs, d)
}

// podStatusesSay reports whether the pod statuses of pods' volumes of class
// say version, and a change unless version is "1" (the first publish).
func podStatusesSay(t *testing.T, api client.Client, pods []*corev1.Pod, class, version string) bool {
	t.Helper()
	for _, p := range pods {
		st := &secretsstorev1.SecretProviderClassPodStatus{}
		key := types.NamespacedName{Namespace: p.Namespace, Name: podstatus.Name(p.Name, p.Namespace, class)}
		if err := api.Get(t.Context(), key, st); err != nil {
			t.Fatal(err)
		}
		changed := meta.IsStatusConditionTrue(st.Status.Conditions, secretsstorev1.ConditionContentChanged)
		if changed != (version != "1") || len(st.Status.Objects) != 1 || st.Status.Objects[0].Version != version {
			return false
		}
	}
	return true
}

// checkRestartEvent: one SecretRestarting event on d, from the controller.
func checkRestartEvent(t *testing.T, cs kubernetes.Interface, d *appsv1.Deployment) {
	t.Helper()
	poll.UntilTrue(t, "the restart event on the Deployment", func() bool {
		return len(eventsOn(t, cs, d, restart.ReasonRestarting)) > 0
	})
	if evs := eventsOn(t, cs, d, restart.ReasonRestarting); len(evs) != 1 || evs[0].Count > 1 || evs[0].Source.Component != restart.EventSource {
		t.Errorf("restart events on the Deployment: %+v, want one from %s", evs, restart.EventSource)
	}
}

// startRestartController runs keymount-controller's restart reconcilers
// (no leader election, no listener) until the test ends.
func startRestartController(t *testing.T, cfg *rest.Config) {
	t.Helper()
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	mgr := ctrltest.NewManager(t, cfg, ctrl.Options{Scheme: scheme})
	if err := restart.SetupWithManager(t.Context(), mgr, restart.Options{DriverName: driver.DefaultDriverName}); err != nil {
		t.Fatal(err)
	}
	ctrltest.Start(t, mgr)
}

func createDeployment(t *testing.T, cs kubernetes.Interface, ns string) (*appsv1.Deployment, *appsv1.ReplicaSet) {
	t.Helper()
	labels := map[string]string{"app": "web"}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	d, err := cs.AppsV1().Deployments(ns).Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := cs.AppsV1().ReplicaSets(ns).Create(t.Context(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: labels, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: new(true)},
		}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d, rs
}

// createPod creates a pod on nodeName with a keymount volume of class db,
// mounted by container app at /mnt/secrets, and at mount too when given.
func createPod(t *testing.T, cs kubernetes.Interface, ns, name, nodeName string, owner metav1.OwnerReference,
	annotations map[string]string, mount *corev1.VolumeMount) *corev1.Pod {
	t.Helper()
	mounts := []corev1.VolumeMount{{Name: "secrets", MountPath: "/mnt/secrets"}}
	if mount != nil {
		mounts = append(mounts, *mount)
	}
	p, err := cs.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1", VolumeMounts: mounts}},
			Volumes: []corev1.Volume{{Name: "secrets", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
				Driver: driver.DefaultDriverName, ReadOnly: new(true),
				VolumeAttributes: map[string]string{"secretProviderClass": "db"},
			}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// eventsOn lists the events with reason about obj.
func eventsOn(t *testing.T, cs kubernetes.Interface, obj metav1.Object, reason string) []corev1.Event {
	t.Helper()
	list, err := cs.CoreV1().Events(obj.GetNamespace()).List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.uid": string(obj.GetUID()), "reason": reason}.String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}
