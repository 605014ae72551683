//go:build integration

package reflector_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/keymount/keymount/tests/promtext"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/reflector"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/tests/ctrltest"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// eventually is how long a test waits for the controller.
const eventually = 60 * time.Second

// fixture is a real API server and the reflector reconcilers on it.
type fixture struct {
	cs kubernetes.Interface
	// reg holds the reconcilers' fan-out metrics.
	reg *prometheus.Registry
}

// metric sums the series of the fan-out metric name whose labels include
// labels: a counter's values, a histogram's counts.
func (f *fixture) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	sum, err := promtext.Sum(f.reg, name, labels)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// waitMetric waits until the fan-out metric name (labels) reaches at
// least want.
func (f *fixture) waitMetric(t *testing.T, name string, labels map[string]string, want float64) {
	t.Helper()
	err := poll.Wait(t.Context(), eventually, func(context.Context) (bool, error) {
		return f.metric(t, name, labels) >= want, nil
	})
	if err != nil {
		t.Fatalf("%s%v = %v, want at least %v: %v", name, labels, f.metric(t, name, labels), want, err)
	}
}

func startFixture(t *testing.T) *fixture { t.Helper(); return startFixtureWith(t, k8senv.Options{}) }

// startFixtureWith starts the control plane with opts.
func startFixtureWith(t *testing.T, opts k8senv.Options) *fixture {
	t.Helper()
	ctrl.SetLogger(klog.Background())
	// Own control plane: the reflector fans out to every namespace its selectors match, and the tests assert on metric counts.
	env := k8senv.Start(t, opts)
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	mgr := ctrltest.NewManager(t, env.Config, ctrl.Options{Scheme: scheme})
	c, err := fanout.NewCache(mgr)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := fanout.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := reflector.SetupWithManager(t.Context(), mgr, reflector.Options{Cache: c, Workers: 2, Metrics: m}); err != nil {
		t.Fatal(err)
	}
	ctrltest.Start(t, mgr)
	return &fixture{cs: kubernetes.NewForConfigOrDie(env.Config), reg: reg}
}

func (f *fixture) namespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	_, err := f.cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) relabel(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ns, err := f.cs.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels = labels
	if _, err := f.cs.CoreV1().Namespaces().Update(t.Context(), ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// source creates a Secret in ns with data and reflector annotations.
func (f *fixture) source(t *testing.T, ns, name string, data map[string]string, annotations map[string]string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}, StringData: data}
	out, err := f.cs.CoreV1().Secrets(ns).Create(t.Context(), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *fixture) update(t *testing.T, ns, name string, change func(*corev1.Secret)) *corev1.Secret {
	t.Helper()
	s, err := f.cs.CoreV1().Secrets(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(s)
	out, err := f.cs.CoreV1().Secrets(ns).Update(t.Context(), s, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitFor polls the Secret ns/name until check passes (a nil Secret: it
// does not exist); it fails the test with check's last message.
func (f *fixture) waitFor(t *testing.T, ns, name string, check func(*corev1.Secret) error) {
	t.Helper()
	ctrltest.WaitSecret(t, f.cs, ns, name, check)
}

// absent: the Secret does not exist.
func absent(s *corev1.Secret) error {
	if s != nil {
		return fmt.Errorf("exists (labels %v), want none", s.Labels)
	}
	return nil
}

// waitEvent waits for an event with reason about the object ns/name.
func (f *fixture) waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	err := poll.Wait(t.Context(), eventually, func(ctx context.Context) (bool, error) {
		l, err := f.cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range l.Items {
			if e.Reason == reason && e.Regarding.Name == name {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event on %s/%s: %v", reason, ns, name, err)
	}
}

func waitConfigMap(t *testing.T, f *fixture, ns, name string, check func(*corev1.ConfigMap) error) {
	t.Helper()
	ctrltest.WaitFor(t, "ConfigMap "+ns+"/"+name, func(ctx context.Context) (*corev1.ConfigMap, error) {
		return f.cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	}, check)
}
