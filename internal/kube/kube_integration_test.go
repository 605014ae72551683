//go:build integration

package kube_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/internal/panics"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// TestAgainstAPIServer runs the client, the cache and the event sink
// against a real kube-apiserver with keymount's CRDs.
func TestAgainstAPIServer(t *testing.T) {
	// Own control plane: the package's only one (Shared would save nothing).
	env := k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: []string{"../../deploy/crds"}})
	api, err := kube.NewAPI(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-test"}}
	if _, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("writes", func(t *testing.T) { testWrites(t, api, ns.Name) })
	t.Run("apply", func(t *testing.T) { testApply(t, api, ns.Name) })
	t.Run("list", func(t *testing.T) { testList(t, api, ns.Name) })
	t.Run("cache", func(t *testing.T) { testCache(t, api, ns.Name) })
	t.Run("events", func(t *testing.T) { testEvents(t, api, ns.Name) })
}

func key(obj kube.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// testWrites: create, update (and its conflict), merge patch and a
// conditional delete of a custom resource, with apierrors as client-go's.
func testWrites(t *testing.T, api *kube.API, ns string) {
	ctx := t.Context()
	st := &secretsstorev1.SecretProviderClassPodStatus{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "st", Labels: map[string]string{"a": "1"}},
		Status:     secretsstorev1.SecretProviderClassPodStatusStatus{PodName: "p", Mounted: true},
	}
	if err := api.Create(ctx, st, "test-manager"); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if st.UID == "" || st.ResourceVersion == "" {
		t.Fatalf("Create did not fill the object: %+v", st.ObjectMeta)
	}
	if got := st.ManagedFields; len(got) != 1 || got[0].Manager != "test-manager" {
		t.Errorf("managed fields %+v, want one entry of test-manager", got)
	}
	again := st.DeepCopy()
	again.ResourceVersion = ""
	if err := api.Create(ctx, again, ""); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second Create: %v, want AlreadyExists", err)
	}
	stale := st.DeepCopy()
	st.Status.TargetPath = "/t"
	if err := api.Update(ctx, st); err != nil {
		t.Fatalf("Update: %v", err)
	}
	stale.Status.TargetPath = "/stale"
	if err := api.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Errorf("Update of a stale object: %v, want a conflict", err)
	}
	patched := &secretsstorev1.SecretProviderClassPodStatus{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "st"}}
	if err := api.Patch(ctx, patched, types.MergePatchType, []byte(`{"metadata":{"labels":{"b":"2"}}}`), "patcher"); err != nil {
		t.Fatalf("Patch: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"a": "1", "b": "2"}, patched.Labels); diff != "" {
		t.Errorf("labels after the patch (-want +got):\n%s", diff)
	}
	got := &secretsstorev1.SecretProviderClassPodStatus{}
	if err := api.Get(ctx, key(st), got); err != nil || got.Status.TargetPath != "/t" || got.Labels["b"] != "2" {
		t.Fatalf("Get: %v, %+v", err, got)
	}
	old := st.ResourceVersion
	if err := api.Delete(ctx, got, &metav1.Preconditions{ResourceVersion: &old}); !apierrors.IsConflict(err) {
		t.Errorf("Delete at an old resourceVersion: %v, want a conflict", err)
	}
	rv := got.ResourceVersion
	if err := api.Delete(ctx, got, &metav1.Preconditions{ResourceVersion: &rv}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := api.Get(ctx, key(st), got); !apierrors.IsNotFound(err) {
		t.Errorf("Get after Delete: %v, want NotFound", err)
	}
	if err := api.Delete(ctx, got, nil); !apierrors.IsNotFound(err) {
		t.Errorf("second Delete: %v, want NotFound", err)
	}
}

// testApply: a server-side apply as a manager, forced over another
// manager's field, on the Secret of one uid only.
func testApply(t *testing.T, api *kube.API, ns string) {
	ctx := t.Context()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "applied"},
		Data:       map[string][]byte{"k": []byte("created")},
	}
	if err := api.Create(ctx, s, "creator"); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"applied","namespace":%q,"uid":%q},"data":{"k":"YXBwbGllZA=="}}`, ns, s.UID)
	out := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "applied"}}
	if err := api.Apply(ctx, out, []byte(config), "applier"); err != nil {
		t.Fatalf("Apply over another manager's field: %v", err)
	}
	if string(out.Data["k"]) != "applied" || out.ResourceVersion == s.ResourceVersion {
		t.Errorf("Apply answered data %q, resourceVersion %s (was %s)", out.Data["k"], out.ResourceVersion, s.ResourceVersion)
	}
	var managers []string
	for _, e := range out.ManagedFields {
		managers = append(managers, e.Manager+"/"+string(e.Operation))
	}
	if diff := cmp.Diff([]string{"applier/Apply", "creator/Update"}, managers); diff != "" {
		t.Errorf("managers (-want +got):\n%s", diff)
	}
	other := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"applied","namespace":%q,"uid":"not-the-uid"}}`, ns)
	if err := api.Apply(ctx, out, []byte(other), "applier"); !apierrors.IsInvalid(err) {
		t.Errorf("Apply on another uid: %v, want the API server's refusal", err)
	}
	if err := api.Apply(ctx, out, []byte(config), ""); err == nil {
		t.Error("Apply without a field manager succeeded")
	}
}

// testList: by namespace, label, field and with a limit.
func testList(t *testing.T, api *kube.API, ns string) {
	ctx := t.Context()
	for i, node := range []string{"node-a", "node-a", "node-b"} {
		p := pod(ns, fmt.Sprintf("list-%d", i), node)
		p.Labels = map[string]string{"i": fmt.Sprint(i % 2)}
		if err := api.Create(ctx, p, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		opts kube.ListOptions
		want []string
	}{
		{"namespace", kube.ListOptions{Namespace: ns}, []string{"list-0", "list-1", "list-2"}},
		{"field", kube.ListOptions{Fields: fields.OneTermEqualSelector("spec.nodeName", "node-a")}, []string{"list-0", "list-1"}},
		{"label", kube.ListOptions{Namespace: ns, Labels: labels.SelectorFromSet(labels.Set{"i": "0"})}, []string{"list-0", "list-2"}},
		{"limit", kube.ListOptions{Namespace: ns, Limit: 1}, []string{"list-0"}},
		{"other namespace", kube.ListOptions{Namespace: "default"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var list corev1.PodList
			if err := api.List(ctx, &list, tc.opts); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range list.Items {
				names = append(names, p.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}
}

// testCache: a cache scoped by field serves only what its scope selects,
// transformed, catches up with changes, copies on read, and refuses kinds
// it does not watch.
func testCache(t *testing.T, api *kube.API, ns string) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	trimmed := func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			p.Spec.Containers = nil
		}
		return obj, nil
	}
	c, err := kube.NewCache(api, []kube.Watch{
		{Object: &corev1.Pod{}, Fields: fields.OneTermEqualSelector("spec.nodeName", "node-c"), Transform: trimmed},
		{Object: &secretsstorev1.SecretProviderClassPodStatus{}, Transform: kube.StripManagedFields},
	})
	if err != nil {
		t.Fatal(err)
	}
	mine, other := pod(ns, "cache-mine", "node-c"), pod(ns, "cache-other", "node-d")
	for _, p := range []*corev1.Pod{mine, other} {
		if err := api.Create(ctx, p, ""); err != nil {
			t.Fatal(err)
		}
	}
	c.Start(ctx)
	if !c.WaitForSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	got := &corev1.Pod{}
	if err := c.Get(ctx, key(mine), got); err != nil {
		t.Fatalf("Get of a watched pod: %v", err)
	}
	if got.UID != mine.UID || got.Spec.Containers != nil || got.Kind != "Pod" {
		t.Errorf("cached pod: uid %s, containers %v, kind %q; want %s, none (transformed), Pod", got.UID, got.Spec.Containers, got.Kind, mine.UID)
	}
	got.Labels = map[string]string{"changed": "by the reader"}
	again := &corev1.Pod{}
	if err := c.Get(ctx, key(mine), again); err != nil || again.Labels["changed"] != "" {
		t.Errorf("a read changed the cache: %v, %v", err, again.Labels)
	}
	if err := c.Get(ctx, key(other), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of another node's pod: %v, want NotFound", err)
	}
	if err := c.Get(ctx, key(mine), &corev1.Secret{}); err == nil || apierrors.IsNotFound(err) {
		t.Errorf("Get of an unwatched kind: %v, want a refusal", err)
	}
	if err := c.List(ctx, &corev1.PodList{}, kube.ListOptions{Fields: fields.Everything()}); err == nil {
		t.Error("List by field from the cache succeeded")
	}
	testCacheFollows(ctx, t, c, api, ns)
	testHandlerPanics(ctx, t, c, api, mine)
}

// testHandlerPanics: a panic in an update handler is recovered and counted
// (keymount_panics_recovered_total{handler="informer"}); the informer, and
// the process, go on delivering the next updates to it.
func testHandlerPanics(ctx context.Context, t *testing.T, c *kube.Cache, api *kube.API, p *corev1.Pod) {
	before := recoveredInformerPanics(t)
	var calls atomic.Int32
	var seen atomic.Value // the label "round" of the last update handled
	err := c.OnUpdate(&corev1.Pod{}, func(_, n kube.Object) {
		if calls.Add(1) == 1 {
			panic("injected bug in an informer handler")
		}
		seen.Store(n.GetLabels()["round"])
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, round := range []string{"1", "2", "3"} {
		patch := []byte(`{"metadata":{"labels":{"round":"` + round + `"}}}`)
		if err := api.Patch(ctx, p.DeepCopy(), types.MergePatchType, patch, "test"); err != nil {
			t.Fatal(err)
		}
		if round == "1" {
			poll.UntilTrue(t, "the handler to panic", func() bool { return recoveredInformerPanics(t) == before+1 })
			continue
		}
		poll.UntilTrue(t, "the handler to see round "+round+" after its panic", func() bool { return seen.Load() == round })
	}
	if got := recoveredInformerPanics(t); got != before+1 {
		t.Errorf("%v informer panics recovered, want %v", got, before+1)
	}
}

// recoveredInformerPanics reads keymount_panics_recovered_total{handler="informer"}.
func recoveredInformerPanics(t *testing.T) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(panics.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "handler" && l.GetValue() == panics.Informer {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatal("no keymount_panics_recovered_total{handler=\"informer\"}")
	return 0
}

// testCacheFollows: the cache sees a new status, without managed fields,
// lists it by namespace and label, and sees it deleted.
func testCacheFollows(ctx context.Context, t *testing.T, c *kube.Cache, api *kube.API, ns string) {
	st := &secretsstorev1.SecretProviderClassPodStatus{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cached-st", Labels: map[string]string{"x": "y"}}}
	if err := api.Create(ctx, st, "creator"); err != nil {
		t.Fatal(err)
	}
	var cached secretsstorev1.SecretProviderClassPodStatus
	poll.UntilTrue(t, "the cache to see the new status", func() bool {
		return c.Get(ctx, key(st), &cached) == nil
	})
	if cached.ManagedFields != nil {
		t.Errorf("cached managed fields %v, want them stripped", cached.ManagedFields)
	}
	var list secretsstorev1.SecretProviderClassPodStatusList
	if err := c.List(ctx, &list, kube.ListOptions{Namespace: ns, Labels: labels.SelectorFromSet(labels.Set{"x": "y"})}); err != nil || len(list.Items) != 1 {
		t.Errorf("List by namespace and label: %v, %d items, want 1", err, len(list.Items))
	}
	if err := c.List(ctx, &list, kube.ListOptions{Namespace: "default"}); err != nil || len(list.Items) != 0 {
		t.Errorf("List of another namespace: %v, %d items, want 0", err, len(list.Items))
	}
	if err := api.Delete(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, "the cache to see the status deleted", func() bool {
		return apierrors.IsNotFound(c.Get(ctx, key(st), &cached))
	})
}

// testEvents: the sink creates and patches events as client-go's does.
func testEvents(t *testing.T, api *kube.API, ns string) {
	ctx := t.Context()
	sink := kube.NewEventSink(api)
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: "p.1"},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "p"},
		Reason:         "Tested", Message: "first", Type: corev1.EventTypeNormal, Count: 1,
		Source: corev1.EventSource{Component: "kube-test"},
	}
	created, err := sink.Create(ev)
	if err != nil || created.UID == "" {
		t.Fatalf("Create: %v, %+v", err, created)
	}
	patched, err := sink.Patch(ev, []byte(`{"count":2,"message":"second"}`))
	if err != nil || patched.Count != 2 || patched.Message != "second" {
		t.Fatalf("Patch: %v, count %d, message %q", err, patched.Count, patched.Message)
	}
	patched.Message = "third"
	updated, err := sink.Update(patched)
	if err != nil || updated.Message != "third" {
		t.Fatalf("Update: %v, %+v", err, updated)
	}
	stored := &corev1.Event{}
	if err := api.Get(ctx, key(ev), stored); err != nil || stored.Message != "third" || stored.Count != 2 {
		t.Errorf("stored event: %v, message %q, count %d", err, stored.Message, stored.Count)
	}
}

func pod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
		},
	}
}
