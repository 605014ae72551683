//go:build integration

package secretmirror_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/keymount/keymount/tests/promtext"

	"github.com/keymount/keymount/tests/poll"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/push"
	"github.com/keymount/keymount/controller/secretmirror"
	"github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/controller/tokens"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/tests/ctrltest"
	"github.com/keymount/keymount/tests/k8senv"
)

// fixture is a real API server with keymount's CRDs and the SecretMirror
// reconciler running against it, with the manager's cache as
// keymount-controller configures it.
//
// On the package's shared control plane the tests' namespaces are named
// apart: the helpers take the names a test gives and prefix them with the
// fixture's run (ns), and prefix the regexes of destinations (re), so
// neither another test's SecretMirrors nor an earlier run's (-count) reach
// them.
type fixture struct {
	// run prefixes the namespaces; empty on a control plane of the test's own.
	run string
	cfg *k8senv.Env
	c   client.Client // uncached
	cs  kubernetes.Interface
	// reg holds the reconciler's fan-out and push metrics.
	reg *prometheus.Registry
	// stop stops the reconciler's manager (a controller restart); the
	// test's end stops it too.
	stop func()
}

// metric sums the series of the fan-out metric name whose labels include
// labels: a counter's values, a histogram's counts.
func (f *fixture) metric(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	sum, err := promtext.Sum(f.reg, name, labels)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// waitMetric waits until the fan-out metric name (labels) reaches at
// least want.
func (f *fixture) waitMetric(t testing.TB, name string, labels map[string]string, want float64) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%s%v at least %v", name, labels, want), func(context.Context) (bool, error) {
		return f.metric(t, name, labels) >= want, nil
	})
}

// crds are keymount's CustomResourceDefinitions.
var crds = []string{"../../deploy/crds"}

// startFixture runs the reconciler against the package's shared control
// plane (k8senv.Shared), with kube-controller-manager's garbage collector
// and namespace controller, so namespaces are deleted as in a cluster. The
// tests run one after the other and each one's manager stops with it: the
// SecretMirrors an earlier test left are reconciled by the next one's, and
// their destinations match none of its namespaces (run).
func startFixture(t *testing.T) *fixture {
	t.Helper()
	env := k8senv.Shared(t, k8senv.Options{CRDDirectoryPaths: crds, ControllerManager: true, Controllers: []string{"namespace-controller"}})
	return newFixture(t, env, rand.String(5)+"-")
}

// startOwnFixture runs the reconciler against a control plane of the
// test's own, whose namespaces keep the names the test gives.
func startOwnFixture(t testing.TB) *fixture {
	t.Helper()
	// Own control plane: vaultenv binds its token reviewer's ClusterRoleBinding (a fixed name) for Vault's Kubernetes auth.
	return newFixture(t, k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: crds}), "")
}

// ns is the namespace the test calls name.
func (f *fixture) ns(name string) string { return f.run + name }

// re is regex, a destination regex of the test's namespace names, for the
// names ns gives: anchored at their start.
func (f *fixture) re(regex string) string {
	if f.run == "" {
		return regex
	}
	if rest, ok := strings.CutPrefix(regex, "^"); ok {
		return "^" + regexp.QuoteMeta(f.run) + rest
	}
	return "^" + regexp.QuoteMeta(f.run) + ".*" + regex
}

func newFixture(t testing.TB, env *k8senv.Env, run string) *fixture {
	t.Helper()
	ctrl.SetLogger(klog.Background())
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := mirrorsv1alpha2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f := &fixture{run: run, cfg: env, cs: kubernetes.NewForConfigOrDie(env.Config)}
	if f.c, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	cacheOpts, err := secretsync.CacheOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	mgr := ctrltest.NewManager(t, env.Config, ctrl.Options{Scheme: scheme, Cache: cacheOpts})
	copies, err := fanout.NewCache(mgr)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := tokens.NewManager(f.cs.CoreV1(), tokens.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f.reg = prometheus.NewRegistry()
	m, err := fanout.NewMetrics(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := push.NewMetrics(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	err = secretmirror.SetupWithManager(t.Context(), mgr, secretmirror.Options{Workers: 4, Deps: secretmirror.Deps{
		Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Copies: copies,
		Events: mgr.GetEventRecorder("keymount-controller"),
		Tokens: toks, Audiences: []string{"vault"}, Metrics: m, PushMetrics: pm,
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.stop = startManager(t, mgr)
	return f
}

func (f *fixture) namespace(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := f.c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns(name)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// source creates the Secret ns/name with data k=v.
func (f *fixture) source(t *testing.T, ns, name, v string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns(ns), Name: name, Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{"note": "kept", "reflector.v1.k8s.emberstack.com/reflection-allowed": "true"}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte(v)},
	}
	if err := f.c.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// mirror creates a SecretMirror of source name into namespaces matching
// regexes.
func (f *fixture) mirror(t *testing.T, ns, name, source string, policy mirrorsv1alpha2.DeletePolicy, regexes ...string) *mirrorsv1alpha2.SecretMirror {
	t.Helper()
	dest := make([]string, len(regexes))
	for i, r := range regexes {
		dest[i] = f.re(r)
	}
	m := &mirrorsv1alpha2.SecretMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns(ns), Name: name},
		Spec: mirrorsv1alpha2.SecretMirrorSpec{
			Source:            mirrorsv1alpha2.SecretMirrorSource{Name: source},
			Destination:       mirrorsv1alpha2.SecretMirrorDestination{Namespaces: dest},
			DeletePolicy:      policy,
			PollPeriodSeconds: 3600, // nothing below may rely on the poll
		},
	}
	if err := f.c.Create(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

// secret reads ns/name; nil when it does not exist.
func (f *fixture) secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := f.c.Get(ctx, types.NamespacedName{Namespace: f.ns(ns), Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return s, err
}

// copyHolds waits until ns/name holds k=v.
func (f *fixture) copyHolds(t *testing.T, ns, name, v string) *corev1.Secret {
	t.Helper()
	var got *corev1.Secret
	poll.Until(t, "the copy "+ns+"/"+name+" with k="+v, func(ctx context.Context) (bool, error) {
		s, err := f.secret(ctx, ns, name)
		got = s
		return s != nil && string(s.Data["k"]) == v, err
	})
	return got
}

// gone waits until ns/name does not exist.
func (f *fixture) gone(t *testing.T, ns, name string) {
	t.Helper()
	poll.Until(t, ns+"/"+name+" deleted", func(ctx context.Context) (bool, error) {
		s, err := f.secret(ctx, ns, name)
		return s == nil, err
	})
}

// status waits until the SecretMirror reports want (and, if non-empty, a
// message containing msg) for its current generation.
func (f *fixture) status(t *testing.T, ns, name string, want mirrorsv1alpha2.MirrorStatus, msg string) *mirrorsv1alpha2.SecretMirror {
	t.Helper()
	m := &mirrorsv1alpha2.SecretMirror{}
	err := poll.Wait(t.Context(), poll.Deadline, func(ctx context.Context) (bool, error) {
		if err := f.c.Get(ctx, types.NamespacedName{Namespace: f.ns(ns), Name: name}, m); err != nil {
			return false, err
		}
		return m.Status.MirrorStatus == want && m.Status.ObservedGeneration == m.Generation &&
			strings.Contains(m.Status.Message, msg), nil
	})
	if err != nil {
		t.Fatalf("waiting for SecretMirror %s/%s %s %q: %v; last seen: %s %q (observedGeneration %d of %d)",
			ns, name, want, msg, err, m.Status.MirrorStatus, m.Status.Message, m.Status.ObservedGeneration, m.Generation)
	}
	return m
}

// event waits for an event with reason on the SecretMirror ns/name whose
// note contains note.
func (f *fixture) event(t *testing.T, ns, name, reason, note string) {
	t.Helper()
	poll.Until(t, "event "+reason+" on "+ns+"/"+name, func(ctx context.Context) (bool, error) {
		list, err := f.cs.EventsV1().Events(f.ns(ns)).List(ctx, metav1.ListOptions{})
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

// startManager runs mgr until the returned stop is called or the test
// ends; the test fails if it stops with an error.
func startManager(t testing.TB, mgr ctrl.Manager) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
