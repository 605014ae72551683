//go:build integration

package pushsecret_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pushv1alpha1 "github.com/keymount/keymount/apis/push/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/pushsecret"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/tests/ctrltest"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// store is an in-memory versioned store behind the Providers interface:
// the provider boundary, whose real implementations (the AWS and Vault
// providers) are tested against moto and Vault. It keeps the rules the
// providers keep (version compare, conflict, overwrite) so the
// controller's side is what is tested here: what it sends and records.
type store struct {
	mu sync.Mutex
	// objects: remote key + property → value and version.
	objects map[string]*object
	// calls records every item sent, in order.
	calls []*keymountv1.PushItem
	// removes records every item removed.
	removes []*keymountv1.PushItem
	// unimplemented answers every call Unimplemented.
	unimplemented bool
}

type object struct {
	value   string
	version int
}

func key(it *keymountv1.PushItem) string { return it.GetRemoteKey() + "#" + it.GetProperty() }

func (s *store) Push(_ context.Context, _ string, req *keymountv1.PushRequest) ([]*keymountv1.ItemResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unimplemented {
		return nil, status.Error(codes.Unimplemented, "unknown service keymount.provider.v1.SecretPusher")
	}
	if !strings.Contains(req.GetAttributes(), `"csi.storage.k8s.io/serviceAccount.name":"pusher"`) {
		return nil, status.Error(codes.PermissionDenied, "not the PushSecret's ServiceAccount")
	}
	var out []*keymountv1.ItemResult
	for _, it := range req.GetItems() {
		s.calls = append(s.calls, it)
		o := s.objects[key(it)]
		last := it.GetLastVersion()
		switch {
		case o == nil:
			s.objects[key(it)] = &object{value: string(it.GetValue()), version: 1}
			out = append(out, &keymountv1.ItemResult{Outcome: keymountv1.Outcome_OUTCOME_CREATED, Version: "1"})
		case strconv.Itoa(o.version) == last && it.GetUnchanged():
			out = append(out, &keymountv1.ItemResult{Outcome: keymountv1.Outcome_OUTCOME_UNCHANGED, Version: last})
		case strconv.Itoa(o.version) == last || it.GetPolicy() == keymountv1.UpdatePolicy_UPDATE_POLICY_OVERWRITE:
			o.value, o.version = string(it.GetValue()), o.version+1
			out = append(out, &keymountv1.ItemResult{Outcome: keymountv1.Outcome_OUTCOME_UPDATED, Version: strconv.Itoa(o.version)})
		default:
			out = append(out, &keymountv1.ItemResult{Outcome: keymountv1.Outcome_OUTCOME_CONFLICT,
				Message: fmt.Sprintf("version %d was not written by keymount (it wrote %q)", o.version, last)})
		}
	}
	return out, nil
}

func (s *store) Remove(_ context.Context, _ string, req *keymountv1.RemoveRequest) ([]*keymountv1.ItemResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*keymountv1.ItemResult
	for _, it := range req.GetItems() {
		s.removes = append(s.removes, it)
		o := s.objects[key(it)]
		switch {
		case o == nil:
			out = append(out, &keymountv1.ItemResult{Outcome: keymountv1.Outcome_OUTCOME_REMOVED})
		case strconv.Itoa(o.version) == it.GetLastVersion():
			delete(s.objects, key(it))
			out = append(out, &keymountv1.ItemResult{Outcome: keymountv1.Outcome_OUTCOME_REMOVED})
		default:
			out = append(out, &keymountv1.ItemResult{Outcome: keymountv1.Outcome_OUTCOME_CONFLICT, Message: "someone else's version"})
		}
	}
	return out, nil
}

// set writes k as someone else would.
func (s *store) set(k, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objects[k]
	o.value, o.version = value, o.version+1
}

func (s *store) get(k string) *object {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.objects[k]; o != nil {
		c := *o
		return &c
	}
	return nil
}

// sent returns the items sent for k since call n.
func (s *store) sent(k string, n int) []*keymountv1.PushItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*keymountv1.PushItem
	for _, it := range s.calls[min(n, len(s.calls)):] {
		if key(it) == k {
			out = append(out, it)
		}
	}
	return out
}

func (s *store) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

type fakeTokens struct{}

func (fakeTokens) Tokens(context.Context, string, string, []string) (string, error) {
	return `{"vault":{"token":"t"}}`, nil
}

type fixture struct {
	c     client.Client
	cs    kubernetes.Interface
	store *store
}

func start(t *testing.T) *fixture {
	t.Helper()
	ctrl.SetLogger(klog.Background())
	env := k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: []string{"../../deploy/crds"}})
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := pushv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f := &fixture{cs: kubernetes.NewForConfigOrDie(env.Config), store: &store{objects: map[string]*object{}}}
	if f.c, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	mgr := ctrltest.NewManager(t, env.Config, ctrl.Options{Scheme: scheme})
	err = pushsecret.SetupWithManager(t.Context(), mgr, pushsecret.Options{Deps: pushsecret.Deps{
		Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Events: mgr.GetEventRecorder("keymount-controller"),
		Providers: f.store, Tokens: fakeTokens{}, Audiences: []string{"vault"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctrltest.Start(t, mgr)
	return f
}

func (f *fixture) create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := f.c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// ready waits until ps's Ready condition has reason (and status) for its
// generation, its message containing msg.
func (f *fixture) ready(t *testing.T, ns, name, reason, msg string) *pushv1alpha1.PushSecret {
	t.Helper()
	ps := &pushv1alpha1.PushSecret{}
	err := poll.Wait(t.Context(), poll.Deadline, func(ctx context.Context) (bool, error) {
		if err := f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ps); err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(ps.Status.Conditions, pushv1alpha1.ConditionReady)
		return c != nil && c.Reason == reason && c.ObservedGeneration == ps.Generation && strings.Contains(c.Message, msg), nil
	})
	if err != nil {
		t.Fatalf("PushSecret %s/%s Ready %s %q: %v; conditions %+v", ns, name, reason, msg, err, ps.Status.Conditions)
	}
	return ps
}

func (f *fixture) event(t *testing.T, ns, name, reason, note string) {
	t.Helper()
	poll.Until(t, "event "+reason+" on "+name, func(ctx context.Context) (bool, error) {
		list, err := f.cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason && strings.Contains(e.Note, note) {
				return true, nil
			}
		}
		return false, nil
	})
}

func version(ps *pushv1alpha1.PushSecret, remoteKey, property string) string {
	for _, p := range ps.Status.Pushed {
		if p.RemoteKey == remoteKey && p.Property == property {
			return p.Version
		}
	}
	return ""
}

// TestPushSecretOnAPIServer runs the reconciler against a real API server:
// what it sends the provider (the ServiceAccount, the versions keymount
// wrote, unchanged values marked so), what it records (status.pushed,
// Ready, events), conflicts left until the PushSecret is annotated,
// deletionPolicy Delete removing only keymount's values, a provider that
// does not push.
func TestPushSecretOnAPIServer(t *testing.T) {
	f := start(t)
	if _, err := f.cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "creds"},
		Data: map[string][]byte{"user": []byte("app"), "password": []byte("one")}}
	class := &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "store"},
		Spec: secretsstorev1.SecretProviderClassSpec{Provider: "fake", Parameters: map[string]string{"region": "us-east-1"}}}
	ps := &pushv1alpha1.PushSecret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "creds"},
		Spec: pushv1alpha1.PushSecretSpec{
			SecretProviderClassName: "store", ServiceAccountName: "pusher",
			RefreshInterval: &metav1.Duration{Duration: 0},
			DeletionPolicy:  pushv1alpha1.DeletionPolicyDelete,
			Selector:        pushv1alpha1.PushSecretSelector{Secret: pushv1alpha1.PushSecretSecret{Name: "creds"}},
			Data: []pushv1alpha1.PushSecretData{
				{Match: pushv1alpha1.PushSecretMatch{SecretKey: "password", RemoteRef: pushv1alpha1.PushSecretRemoteRef{RemoteKey: "team/db", Property: "password"}}},
				{Match: pushv1alpha1.PushSecretMatch{SecretKey: "user", RemoteRef: pushv1alpha1.PushSecretRemoteRef{RemoteKey: "team/db", Property: "user"}}},
			},
		},
	}
	f.create(t, ps)
	f.ready(t, "team", "creds", pushsecret.ReasonSecretMissing, "Secret team/creds not found")
	f.create(t, secret)
	f.ready(t, "team", "creds", pushsecret.ReasonClassMissing, "SecretProviderClass team/store not found")
	f.create(t, class)
	got := f.ready(t, "team", "creds", pushsecret.ReasonSynced, "2 values pushed through SecretProviderClass store")
	if version(got, "team/db", "password") != "1" || version(got, "team/db", "user") != "1" || !controllerutil.ContainsFinalizer(got, pushv1alpha1.Finalizer) {
		t.Fatalf("status.pushed %+v, finalizers %v: want both at version 1 and the finalizer (deletionPolicy Delete)", got.Status.Pushed, got.Finalizers)
	}
	f.event(t, "team", "creds", pushsecret.EventPushed, "created 2")
	if o := f.store.get("team/db#password"); o == nil || o.value != "one" {
		t.Fatalf("the store holds %+v, want one", o)
	}

	// The Secret changes: the changed value is sent as changed with the
	// version keymount wrote, the other as unchanged.
	n := f.store.count()
	secret.Data["password"] = []byte("two")
	if err := f.c.Update(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "password two in the store", func(context.Context) (bool, error) {
		o := f.store.get("team/db#password")
		return o != nil && o.value == "two", nil
	})
	if its := f.store.sent("team/db#password", n); len(its) == 0 || its[0].GetUnchanged() || its[0].GetLastVersion() != "1" || its[0].GetOwner() != "team/creds" {
		t.Errorf("the changed value was sent as %+v, want changed, last version 1, owner team/creds", its)
	}
	if its := f.store.sent("team/db#user", n); len(its) == 0 || !its[0].GetUnchanged() || its[0].GetLastVersion() != "1" {
		t.Errorf("the unchanged value was sent as %+v, want unchanged at version 1", its)
	}
	f.ready(t, "team", "creds", pushsecret.ReasonSynced, "")

	testConflict(t, f, ps, secret)
	testRemoval(t, f, ps)
	// A provider without the push extension.
	f.store.mu.Lock()
	f.store.unimplemented = true
	f.store.mu.Unlock()
	other := ps.DeepCopy()
	other.ObjectMeta = metav1.ObjectMeta{Namespace: "team", Name: "upstream"}
	other.Spec.DeletionPolicy = pushv1alpha1.DeletionPolicyNone
	f.create(t, other)
	f.ready(t, "team", "upstream", pushsecret.ReasonProviderDoesNotPush, `provider "fake" does not push`)
}

// testConflict: someone else writes; keymount's next change is a conflict,
// their value kept, until the PushSecret is annotated.
func testConflict(t *testing.T, f *fixture, ps *pushv1alpha1.PushSecret, secret *corev1.Secret) {
	// Someone else writes: a conflict, kept until the annotation says.
	f.store.set("team/db#password", "theirs")
	secret.Data["password"] = []byte("three")
	if err := f.c.Update(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	f.ready(t, "team", "creds", pushsecret.ReasonPushConflict, "team/db property password: version 3 was not written by keymount")
	f.event(t, "team", "creds", pushsecret.ReasonPushConflict, pushv1alpha1.AnnotationOverwrite+"=true")
	if o := f.store.get("team/db#password"); o.value != "theirs" {
		t.Fatalf("their value was replaced: %q", o.value)
	}
	cur := &pushv1alpha1.PushSecret{}
	if err := f.c.Get(t.Context(), client.ObjectKeyFromObject(ps), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Annotations = map[string]string{pushv1alpha1.AnnotationOverwrite: "true"}
	if err := f.c.Patch(t.Context(), cur, patch); err != nil {
		t.Fatal(err)
	}
	got := f.ready(t, "team", "creds", pushsecret.ReasonSynced, "")
	if o := f.store.get("team/db#password"); o.value != "three" || version(got, "team/db", "password") != "4" {
		t.Fatalf("after the annotation: store %+v, status version %q; want three at 4", o, version(got, "team/db", "password"))
	}

}

// testRemoval: a value no longer named, then the PushSecret itself, with
// deletionPolicy Delete: keymount's values removed.
func testRemoval(t *testing.T, f *fixture, ps *pushv1alpha1.PushSecret) {
	cur := &pushv1alpha1.PushSecret{}
	// The PushSecret stops naming user: keymount's value removed.
	if err := f.c.Get(t.Context(), client.ObjectKeyFromObject(ps), cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Data = cur.Spec.Data[:1]
	if err := f.c.Update(t.Context(), cur); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "team/db user removed", func(context.Context) (bool, error) { return f.store.get("team/db#user") == nil, nil })
	f.event(t, "team", "creds", pushsecret.EventRemoved, "team/db property user")

	// Deleted: keymount's last value removed, then the PushSecret goes.
	if err := f.c.Delete(t.Context(), cur); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the PushSecret gone", func(ctx context.Context) (bool, error) {
		err := f.c.Get(ctx, client.ObjectKeyFromObject(ps), &pushv1alpha1.PushSecret{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if o := f.store.get("team/db#password"); o != nil {
		t.Errorf("deletionPolicy Delete left %+v", o)
	}

}
