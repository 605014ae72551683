//go:build integration

package secretsync_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	secretsync "github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/local"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/ctrltest"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// audience is the token audience the controller is configured with.
const audience = "keymount-controller-test"

// fixture is a real API server, the local provider on a real unix socket
// over a store directory, and the controller running against both.
type fixture struct {
	cs    kubernetes.Interface
	c     client.Client // uncached
	store string        // the local provider's root
	socks string        // the provider socket directory
	calls atomic.Int64  // provider Mount calls

	namespaces []string // created by namespace
}

// countingProviders counts the controller's provider calls.
type countingProviders struct {
	next  secretsync.Providers
	calls *atomic.Int64
}

func (p countingProviders) Mount(ctx context.Context, provider string, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	p.calls.Add(1)
	return p.next.Mount(ctx, provider, req)
}

func startFixture(t *testing.T, cfg secretsync.Config) *fixture {
	t.Helper()
	return startFixtureAs(t, cfg, nil)
}

// startFixtureAs is startFixture whose controller makes its requests with
// the config as returns for the environment and the controller's namespace
// (nil: as the environment's administrator).
func startFixtureAs(t *testing.T, cfg secretsync.Config, as func(env *k8senv.Env, controllerNS string) *rest.Config) *fixture {
	t.Helper()
	ctrl.SetLogger(klog.Background())
	env := k8senv.Shared(t, k8senv.Options{CRDDirectoryPaths: []string{"../../deploy/crds"}})
	f := &fixture{cs: kubernetes.NewForConfigOrDie(env.Config), store: t.TempDir()}
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if f.c, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	f.socks = sockettest.Dir(t)
	p, err := local.New(f.store)
	if err != nil {
		t.Fatal(err)
	}
	ctrltest.ServeProvider(t, f.socks, "local", p)

	controllerNS := f.namespace(t, "keymount-system")
	cfg.Audiences = []string{audience}
	cfg.Pod.Name, cfg.Pod.Namespace, cfg.Pod.UID = "keymount-controller-0", controllerNS, "0000-test"
	restCfg := env.Config
	if as != nil {
		restCfg = as(env, controllerNS)
	}
	ctrltest.SyncController{Config: cfg, SocketDir: f.socks, Workers: 4, WrapProviders: func(pc secretsync.Providers) secretsync.Providers {
		return countingProviders{next: pc, calls: &f.calls}
	}}.Start(t, restCfg, scheme)
	// Registered after the controller's start, so it runs before its stop.
	t.Cleanup(func() { f.deleteSecretSyncs(t) })
	return f
}

// namespace creates a namespace named prefix-<random> and returns its name:
// the tests share one control plane (k8senv.Shared).
func (f *fixture) namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := f.c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	f.namespaces = append(f.namespaces, ns.Name)
	return ns.Name
}

// deleteSecretSyncs deletes the test's SecretSyncs when it ends, so that
// the controllers of the tests after it, which watch every namespace, never
// sync them (and call their providers).
func (f *fixture) deleteSecretSyncs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, ns := range f.namespaces {
		if err := f.c.DeleteAllOf(ctx, &ss1.SecretSync{}, client.InNamespace(ns)); err != nil {
			t.Errorf("deleting the SecretSyncs of namespace %s: %v", ns, err)
			continue
		}
		err := poll.Wait(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			var l ss1.SecretSyncList
			if err := f.c.List(ctx, &l, client.InNamespace(ns)); err != nil {
				return false, err
			}
			return len(l.Items) == 0, nil
		})
		if err != nil {
			t.Errorf("the SecretSyncs of namespace %s are not gone: %v", ns, err)
		}
	}
}

// app makes a namespace prefix-<random> with a service account "app" and a
// class "store" serving the objects of the store directory named, and
// returns its name.
func (f *fixture) app(t *testing.T, prefix string, objects ...string) string {
	t.Helper()
	ns := f.namespace(t, prefix)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}
	if err := f.c.Create(t.Context(), sa); err != nil {
		t.Fatal(err)
	}
	yaml := ""
	for _, o := range objects {
		yaml += fmt.Sprintf("- objectName: %q\n", o)
	}
	class := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store"},
		Spec:       secretsstorev1.SecretProviderClassSpec{Provider: "local", Parameters: map[string]string{"objects": yaml}},
	}
	if err := f.c.Create(t.Context(), class); err != nil {
		t.Fatal(err)
	}
	return ns
}

// put writes an object of the store.
func (f *fixture) put(t *testing.T, name, value string) {
	t.Helper()
	p := filepath.Join(f.store, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
}

// secretSync is a SecretSync "name" of class "store" and service account
// "app" mapping sourcePath → targetKey pairs.
func secretSync(ns, name string, pairs ...string) *ss1.SecretSync {
	ss := &ss1.SecretSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: ss1.SecretSyncSpec{
			SecretProviderClassName: "store", ServiceAccountName: "app",
			SecretObject: ss1.SecretObject{Type: string(corev1.SecretTypeOpaque)},
		},
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		ss.Spec.SecretObject.Data = append(ss.Spec.SecretObject.Data, ss1.SecretObjectData{SourcePath: pairs[i], TargetKey: pairs[i+1]})
	}
	return ss
}

// get reads the SecretSync key from the API server.
func (f *fixture) get(t *testing.T, key types.NamespacedName) *ss1.SecretSync {
	t.Helper()
	var ss ss1.SecretSync
	if err := f.c.Get(t.Context(), key, &ss); err != nil {
		t.Fatal(err)
	}
	return &ss
}

// waitReady waits for Ready=True of the SecretSync's current generation
// and returns it.
func (f *fixture) waitReady(t *testing.T, key types.NamespacedName) *ss1.SecretSync {
	t.Helper()
	var out ss1.SecretSync
	poll.Until(t, "Ready=True of "+key.String(), func(ctx context.Context) (bool, error) {
		if err := f.c.Get(ctx, key, &out); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return conditionIs(&out, ss1.ConditionReady, metav1.ConditionTrue, ss1.ReasonSecretUpToDate), nil
	})
	return &out
}

// conditionIs reports whether ss has condition typ with status and reason
// for its current generation.
func conditionIs(ss *ss1.SecretSync, typ string, status metav1.ConditionStatus, reason string) bool {
	for _, c := range ss.Status.Conditions {
		if c.Type == typ {
			return c.Status == status && c.Reason == reason && c.ObservedGeneration == ss.Generation
		}
	}
	return false
}

// secret reads the Secret key.
func (f *fixture) secret(t *testing.T, key types.NamespacedName) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := f.c.Get(t.Context(), key, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// events lists the events about the object name in ns.
func (f *fixture) events(t *testing.T, ns, name string) []corev1.Event {
	t.Helper()
	list, err := f.cs.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}
